"""Architecture-neutral tile programming: who owns which element (:mod:`.ownership`),
per-thread values with that ownership (:mod:`.fragment`), reductions derived from it
(:mod:`.reduce`), views of global and shared memory as tiles (:mod:`.access`), and loads and
stores of fragments by ownership (:mod:`.fragment_io`).

Nothing here names an instruction of one GPU generation; the hardware's operations live in
:mod:`tylo.nvgpu`. The modules are imported on first use, so importing this package is cheap.
"""

from __future__ import annotations
