"""``python -m tylo.ops.attention``: the attention command line (:mod:`tylo.ops.attention.cli`)."""

from __future__ import annotations

import sys

from tylo.ops.attention.cli import run_main

sys.exit(run_main(sys.argv[1:]))
