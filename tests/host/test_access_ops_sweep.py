"""The false-refusal rate of the bounds guards on tylo.ops: every launch the ops make, on
the CPU, checked by kernel.check_launch instead of reaching the driver.

Each op runs its whole host logic (argument checks, planning, the launch arguments) on
ArraySpec arrays, and every ``kern[grid, block](...)`` it makes is replaced by
``kern.check_launch(grid, block, ...)``: the same checks, in the same order, a launch makes
before the driver. These launches are correct (they are what the GPU tier runs and
verifies against float64 references), so each must be accepted: a refusal here is a false
refusal of the guards. The counts are printed with ``-s``.
"""

from __future__ import annotations

import itertools

import pytest

import tylo
import tylo.ops
from tylo.kernel.decorator import Kernel

_ADDRESS = [0]


def spec(shape, dtype):
    """An ArraySpec at its own address (the ops refuse outputs that share memory)."""
    _ADDRESS[0] += 1
    return tylo.ArraySpec(shape, dtype, ptr=_ADDRESS[0] << 36)


@pytest.fixture
def checked(monkeypatch):
    """Kernels launched inside the test are checked, not launched; the list of
    (kernel name, grid, block) checked is returned."""
    seen = []

    def getitem(self, config):
        grid, block = config[0], config[1]

        class Checked:
            def __call__(_, *args, shared=0, stream=None, **kwargs):
                self.check_launch(grid, block, *args, shared=shared, **kwargs)
                seen.append((self.name, grid, block, self, args, shared))

        return Checked()

    monkeypatch.setattr(Kernel, "__getitem__", getitem)
    return seen


@pytest.mark.parametrize(
    ("rows", "cols"), [(1, 1), (3, 7), (7, 33), (64, 1000), (65, 1000), (129, 4096), (2, 20000)]
)
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_softmax_launches_are_accepted(checked, rows, cols, dtype):
    d = getattr(tylo, dtype)
    tylo.ops.softmax(spec((rows, cols), d), out=spec((rows, cols), d))
    assert checked and all("softmax" in c[0] for c in checked)


@pytest.mark.parametrize(("rows", "cols"), [(5, 9), (64, 1000), (33, 4096)])
def test_masked_softmax_launches_are_accepted(checked, rows, cols):
    tylo.ops.softmax(
        spec((rows, cols), tylo.f32), mask=spec((rows, cols), tylo.bool_),
        out=spec((rows, cols), tylo.f32),
    )  # fmt: skip
    assert checked


@pytest.mark.parametrize(("m", "n", "k"), [(1, 1, 8), (65, 97, 72), (128, 256, 64), (300, 17, 40)])
def test_gemm_launches_are_accepted(checked, m, n, k):
    _ADDRESS[0] += 1
    b = tylo.ArraySpec(
        (k, n), tylo.bf16, (1, k), ptr=_ADDRESS[0] << 36
    )  # an (N, K) array, transposed
    tylo.ops.gemm(spec((m, k), tylo.bf16), b, out=spec((m, n), tylo.f32))
    assert checked


@pytest.mark.parametrize(
    ("b", "h", "lq", "lk", "d", "causal"),
    list(itertools.product([1, 2], [2], [17, 130], [17, 300], [64, 128], [False, True]))[::3],
)
def test_attention_launches_are_accepted(checked, b, h, lq, lk, d, causal):
    q = spec((b, h, lq, d), tylo.bf16)
    k = spec((b, h, lk, d), tylo.bf16)
    v = spec((b, h, lk, d), tylo.bf16)
    from tylo.ops.attention import host  # the op's host: its lse given, as no allocation runs

    out, lse = spec((b, h, lq, d), tylo.bf16), spec((b, h, lq), tylo.f32)
    host.attention(q, k, v, causal=causal, out=out, lse=lse)
    host.attention(q, k, v, causal=causal, kv_lens=spec((b,), tylo.i32), out=out, lse=lse)
    assert len(checked) >= 2


@pytest.mark.parametrize(("rows", "cols"), [(64, 1000), (65, 4096)])
def test_the_same_launch_with_a_short_output_is_refused(checked, rows, cols):
    """The refusal side on the ops' own launches: each launch the softmax made, replayed
    with its output one element short, is refused naming the output parameter."""
    out = spec((rows, cols), tylo.f32)
    tylo.ops.softmax(spec((rows, cols), tylo.f32), out=out)
    short = tylo.ArraySpec(rows * cols - 1, tylo.f32, ptr=out.ptr)
    for _name, grid, block, kern, args, shared in checked:
        replay = [short if a is out else a for a in args]
        assert replay != list(args)
        with pytest.raises(tylo.OutOfBoundsLaunchError, match="argument 'out'"):
            kern.check_launch(grid, block, *replay, shared=shared)
