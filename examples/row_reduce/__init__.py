"""Row reduction example: see :mod:`examples.row_reduce.kernel`; run
``python examples/row_reduce/run.py ROWS COLS [--op sum|max]``."""
