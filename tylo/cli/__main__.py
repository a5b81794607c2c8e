"""``python -m tylo.cli``: the ``tylo`` command."""

from __future__ import annotations

import sys

from tylo.cli import main

if __name__ == "__main__":
    sys.exit(main())
