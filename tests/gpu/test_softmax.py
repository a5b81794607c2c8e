# TEST_TARGET: cc>=8.0
"""tylo/ops/softmax on the GPU: every ownership style (lane-local, warp-striped one-pass and
online, MMA-layout one-pass and two-pass), f32 and bf16 in and out, every mask kind, against
a float64 reference on fresh random data with ``-inf`` entries, fully masked and all
``-inf`` rows, rows of length 1, lengths not a multiple of 32, padded rows; launched from tylo
DeviceBuffers and from torch tensors (outputs poisoned with NaN first); typed errors before
launch; the command line. (The assembly checks are in ``tests/nvvm/test_softmax_sass.py``.)
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tylo.ops.softmax.host import softmax, verify
from tylo.ops.softmax.plan import PREFETCH_MIN_CC, SoftmaxError, make_config, vector_width

RUN = [sys.executable, "-m", "tylo.ops.softmax"]
MASKS = ("none", "length", "bool")


pytestmark = pytest.mark.interpret  # the runtime tests here run in the interpreter tier too


def _torch():
    return pytest.importorskip("torch")


# (rows, cols) per style: lengths 1, odd, not a multiple of 32, exactly one tile, past it
LANE_SHAPES = [(1, 1), (37, 1), (5, 7), (300, 16), (129, 12), (64, 33)]
WARP_SHAPES = [(1, 1), (7, 3), (130, 33), (64, 100), (33, 1000), (9, 1024), (5, 4099), (3, 8192)]
MMA_SHAPES = [(1, 2), (70, 64), (33, 62), (17, 200), (65, 1000)]


@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("shape", LANE_SHAPES)
def test_lane(gpu_runtime, shape, dtype, mask):
    r = verify(*shape, style="lane", dtype=dtype, mask=mask)
    assert r["config"].style == "lane"


@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("shape", WARP_SHAPES)
def test_warp_one_pass(gpu_runtime, shape, dtype, mask):
    r = verify(*shape, style="warp", dtype=dtype, mask=mask)
    assert r["config"].style == "warp" and r["config"].passes == 1


@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("shape", [(3, 32768), (2, 40000), (3, 70001)])
def test_warp_long_rows(gpu_runtime, shape, dtype, mask):
    """32,768 elements in registers (1024 threads per row); longer rows: the online form."""
    r = verify(*shape, style="warp", dtype=dtype, mask=mask)
    assert r["config"].passes == (1 if shape[1] <= 32768 else 2)


@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("threads,cols", [(32, 1000), (32, 4096), (256, 8192), (64, 777), (8, 300)])
def test_warp_online_forced(gpu_runtime, threads, cols, mask):
    """The online two-pass kernel on rows that would fit in registers (several tiles)."""
    cfg = make_config(
        "warp", cols, vec=4 if cols % 4 == 0 else 1, mask=mask, threads_per_row=threads, passes=2
    )
    verify(11, cols, dtype="f32", mask=mask, cfg=cfg)


@pytest.mark.interpret(target="sm_90a", when=lambda dtype, cols, threads, mask: cols <= 1000)
@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize(
    "dtype,cols,threads",
    [
        ("bf16", 32768, 1024),
        ("bf16", 17000, 1024),
        ("bf16", 20000, 1024),
        ("f32", 1000, 64),
        ("f32", 4100, 256),
    ],
)
def test_prefetch(gpu_runtime, dtype, cols, threads, mask):
    """The persistent kernel that streams each block's next row into shared memory: 300
    rows over the grid, so blocks walk 1 to 3 rows and stages alternate."""
    if gpu_runtime.cc < PREFETCH_MIN_CC:
        pytest.skip(f"prefetch is for sm_90 and newer (found {gpu_runtime.sm})")
    vec = vector_width(4 if dtype == "f32" else 2, cols, True)
    for stages in (3, 2):
        cfg = make_config(
            "warp",
            cols,
            vec=vec,
            mask=mask,
            threads_per_row=threads,
            rows_per_block=1,
            prefetch=True,
            stages=stages,
        )
        verify(300, cols, dtype=dtype, mask=mask, cfg=cfg)


@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("shape", MMA_SHAPES)
def test_mma(gpu_runtime, shape, dtype, mask):
    r = verify(*shape, style="mma", dtype=dtype, mask=mask)
    assert r["config"].passes == (1 if shape[1] <= 64 else 2)


@pytest.mark.parametrize("style", ["lane", "warp", "mma"])
@pytest.mark.parametrize("dtype,out", [("f32", "bf16"), ("bf16", "f32")])
def test_mixed_dtypes(gpu_runtime, style, dtype, out):
    cols = 12 if style == "lane" else 136
    verify(45, cols, style=style, dtype=dtype, out_dtype=out, mask="bool")


@pytest.mark.interpret(skip="makes torch CUDA tensors; the interpreter takes CPU tensors")
@pytest.mark.parametrize("style", [None, "lane", "warp", "mma"])
@pytest.mark.parametrize("mask", MASKS)
def test_torch_tensors(gpu_runtime, style, mask):
    _torch()
    cols = 10 if style == "lane" else 500
    verify(77, cols, style=style, dtype="bf16", mask=mask, use_torch=True)
    verify(40, cols, style=style, dtype="f32", mask=mask, use_torch=True, pad=4)


@pytest.mark.parametrize("style", ["lane", "warp", "mma"])
@pytest.mark.parametrize("pad", [1, 2, 8])
def test_padded_rows(gpu_runtime, style, pad):
    """Rows that do not start 16-byte aligned fall back to narrower accesses; the padding
    is never written."""
    cols = 14 if style == "lane" else 258
    if style == "mma" and pad % 2:  # MMA rows move element pairs: odd row strides refused
        with pytest.raises(SoftmaxError, match="element pairs"):
            verify(19, cols, style=style, dtype="f32", pad=pad)
        return
    verify(19, cols, style=style, dtype="f32", mask="length", pad=pad)
    verify(19, cols, style=style, dtype="bf16", mask="none", pad=pad)


@pytest.mark.parametrize("style", [None, "warp"])
def test_default_style_picks_by_row_length(gpu_runtime, style):
    assert verify(50, 8, style=style)["config"].style == ("lane" if style is None else "warp")
    assert verify(50, 800, style=style)["config"].style == "warp"


def test_special_values_exactly(gpu_runtime):
    """-inf entries give exactly 0, an all -inf row gives zeros, a single finite value in a
    row of -inf gives exactly 1; a row of equal values is uniform."""
    from tylo.arrays import DeviceBuffer
    from tylo.backend import driver

    x = np.full((4, 64), -np.inf, np.float32)
    x[1, 5] = 3.0
    x[2] = 7.25
    x[3, ::2] = np.linspace(-5, 5, 32)
    for style in ("lane", "warp", "mma"):
        cols = 16 if style == "lane" else 64
        xs = np.ascontiguousarray(x[:, :cols])
        dx = DeviceBuffer.from_numpy(xs)
        dout = DeviceBuffer.empty(xs.shape, "f32").fill_bytes(0xFF)
        softmax(dout, dx, style=style)
        driver.synchronize()
        got = dout.to_numpy()
        assert not np.isnan(got).any()
        assert (got[0] == 0).all()
        assert got[1, 5] == 1.0 and (np.delete(got[1], 5) == 0).all()
        np.testing.assert_allclose(got[2], 1.0 / cols, rtol=1e-6)
        assert (got[3, 1::2] == 0).all()
        np.testing.assert_allclose(got[3].sum(), 1.0, rtol=1e-5)


def test_typed_errors_before_launch(gpu_runtime):
    from tylo.arrays import DeviceBuffer

    x = DeviceBuffer.from_numpy(np.ones((4, 8), np.float32))
    out = DeviceBuffer.empty((4, 8), "f32").fill_bytes(0xFF)
    bad_mask = DeviceBuffer.from_numpy(np.ones((4, 9), bool))
    with pytest.raises(SoftmaxError, match="mask has shape"):
        softmax(out, x, mask=bad_mask)
    with pytest.raises(SoftmaxError, match="dtype"):
        softmax(out, DeviceBuffer.from_numpy(np.ones((4, 8), np.float64)))
    with pytest.raises(SoftmaxError, match="int32"):
        softmax(out, x, lengths=DeviceBuffer.from_numpy(np.ones(4, np.int64)))
    with pytest.raises(SoftmaxError, match="even row length"):
        softmax(
            DeviceBuffer.empty((4, 7), "f32"),
            DeviceBuffer.from_numpy(np.ones((4, 7), np.float32)),
            style="mma",
        )
    assert np.isnan(out.to_numpy()).all()  # nothing ran


@pytest.mark.interpret(
    when=lambda argv: "--torch" not in argv, why="--torch: makes torch CUDA tensors"
)
@pytest.mark.parametrize(
    "argv",
    [
        ["1000", "1000"],
        ["33", "8", "--mask", "bool"],
        ["64", "2048", "--style", "mma", "--dtype", "bf16", "--mask", "length"],
        ["3", "40000", "--style", "warp", "--torch"],
    ],
)
def test_command_line(gpu_runtime, argv):
    r = subprocess.run([*RUN, *argv], check=False, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "softmax: OK" in r.stdout
