"""Row softmax over fragments (``docs/softmax.md``): lane-local, warp-striped and
MMA-layout ownership, with masking. The kernels are in :mod:`examples.softmax.kernel`, the
planning in :mod:`examples.softmax.plan`, launching and verification in
:mod:`examples.softmax.host`."""
