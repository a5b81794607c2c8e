"""``python -m tylo.ops.gemm``: the gemm command line (:mod:`tylo.ops.gemm.cli`)."""

from __future__ import annotations

import sys

from tylo.ops.gemm.cli import run_main

sys.exit(run_main(sys.argv[1:]))
