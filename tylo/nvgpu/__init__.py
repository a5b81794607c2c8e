"""The hardware's operations, grouped by the unit that executes them:

- :mod:`.warp`: one warp's matrix instructions (``mma.sync`` atoms, ``TiledMMA``, the
  ``ldmatrix`` operand loads that feed them, and ``stmatrix`` fragment stores);
- :mod:`.cluster`: thread-block clusters (ranks, the cluster barrier, distributed shared
  memory); with :mod:`.mbarrier` (remote arrives) and :mod:`.tma` (multicast loads);
- :mod:`.cpasync`: copy plans and ``cp.async`` (one thread's asynchronous global-to-shared
  copies, grouped and waited on);
- :mod:`.instructions`: the short inline-PTX wrappers the operations above emit.

Plans here are frozen dataclasses that validate and prove on construction; they describe, and
the backend (:mod:`tylo.backend`) emits.
"""

from __future__ import annotations
