"""tylo.kernel.torch_streams.torch_inline without torch: which inline launch a launcher keeps.

The GPU tier checks the real thing (tests/gpu/test_tma.py unwraps the kept function to the C
InlineLaunch); here a stand-in tensor type shows the rule: arguments with a tensor get a
wrapper that declines the C dispatch and exposes what it wraps as ``__wrapped__``; others
keep the inline launch itself."""

from __future__ import annotations

from tylo.kernel import torch_streams


class _FakeTensor:
    pass


def _inline(dims, args, shared, stream):
    return ("launched", dims, shared, stream)


def test_without_tensors_the_inline_launch_is_kept_itself():
    assert torch_streams.torch_inline(_inline, (1, 2.0)) is _inline
    assert torch_streams.torch_inline(None, (1,)) is None


def test_with_a_tensor_it_is_wrapped_and_the_wrapper_names_it(monkeypatch):
    monkeypatch.setattr(torch_streams, "_TENSOR_TYPES", {_FakeTensor})
    kept = torch_streams.torch_inline(_inline, (_FakeTensor(), 3))
    assert kept is not _inline
    assert kept.__wrapped__ is _inline
    assert kept((1, 1, 1), (), 0, 7) == ("launched", (1, 1, 1), 0, 7)
