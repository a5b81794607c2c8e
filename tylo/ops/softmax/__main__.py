"""``python -m tylo.ops.softmax``: the softmax command line (:mod:`tylo.ops.softmax.cli`)."""

from __future__ import annotations

import sys

from tylo.ops.softmax.cli import run_main

sys.exit(run_main(sys.argv[1:]))
