"""Vector add example: see :mod:`examples.vector_add.kernel`; run ``python
examples/vector_add/run.py N``."""
