# TEST_TARGET: cc>=8.0
"""tylo.ops on the GPU, as a PyTorch user calls it: every op against a float64 reference
written here (not taken from tylo) on fresh random data with outputs poisoned first, for
torch tensors and for tylo DeviceBuffers; torch's current stream honoured (a busy side
stream writes the input just before the call; the same call on the legacy stream reads the
stale input, which shows the test can fail); CUDA-graph capture and replay after one
warm-up, and a typed CaptureError (the capture left usable) for a shape never warmed; the
custom ops through ``torch.library.opcheck`` and ``torch.compile(fullgraph=True)``; and a
backward through an op says it is not implemented."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

torch = pytest.importorskip("torch")

import tylo  # noqa: E402
import tylo.ops  # noqa: E402
from tylo.arrays import DeviceArray, DeviceBuffer  # noqa: E402
from tylo.backend.capture import CaptureError  # noqa: E402

SLEEP = 200_000_000  # cycles of torch.cuda._sleep: ~0.1 s of a busy stream


INTERPRET_SKIP = (  # the interpreter tier (tests/interp_tier.py)
    "torch CUDA tensors, streams and graphs throughout; the interpreter takes CPU tensors"
)


def _rel(got: np.ndarray, want: np.ndarray) -> float:
    assert np.isfinite(got).all(), "an output element is NaN or inf (unwritten?)"
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))


# ------------------------------------------------------------------ float64 references


def gemm_ref(a: np.ndarray, b: np.ndarray, alpha: float = 1.0, relu: bool = False):
    out = alpha * (a.astype(np.float64) @ b.astype(np.float64))
    return np.maximum(out, 0.0) if relu else out


def attention_ref(q, k, v, causal=False, kv_lens=None, scale=None):
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    b, h, lq, d = q.shape
    lk = k.shape[2]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    s = np.einsum("bhqd,bhkd->bhqk", q, k) * scale
    keep = np.ones((b, 1, lq, lk), bool)
    lens = np.full(b, lk) if kv_lens is None else np.asarray(kv_lens)
    for i in range(b):
        keep[i, :, :, lens[i] :] = False
        if causal:  # bottom-right aligned at the key length
            keep[i, :, :, :] &= np.arange(lk)[None, :] <= np.arange(lq)[:, None] + lens[i] - lq
    s = np.where(keep, s, -np.inf)
    m = s.max(-1, keepdims=True)
    empty = m == -np.inf
    e = np.where(keep & ~empty, np.exp(s - np.where(empty, 0, m)), 0.0)
    tot = e.sum(-1, keepdims=True)
    o = np.einsum("bhqk,bhkd->bhqd", e / np.where(tot > 0, tot, 1), v)
    with np.errstate(divide="ignore"):
        lse = np.where(empty[..., 0], -np.inf, np.log(tot[..., 0]) + m[..., 0])
    return o, lse


def softmax_ref(x, mask=None):
    x = np.asarray(x, np.float64)
    keep = np.isfinite(x) if mask is None else np.asarray(mask, bool) & np.isfinite(x)
    v = np.where(keep, x, -np.inf)
    m = v.max(1, keepdims=True)
    e = np.where(keep, np.exp(v - np.where(m == -np.inf, 0, m)), 0.0)
    s = e.sum(1, keepdims=True)
    return np.where(s > 0, e / np.where(s > 0, s, 1), 0.0)


def _np(t) -> np.ndarray:
    return t.detach().double().cpu().numpy()


# ------------------------------------------------------------------ correctness


@pytest.mark.parametrize(
    ("m", "n", "k"), [(65, 97, 73), (256, 128, 64), (1, 1, 1), (300, 17, 1000)]
)
@pytest.mark.parametrize("b_layout", ["nk", "kn"])
@pytest.mark.parametrize("out_layout", ["none", "row", "col"])
def test_gemm_torch(gpu_runtime, m, n, k, b_layout, out_layout):
    g = torch.Generator(device="cuda").manual_seed(m * 7 + n * 3 + k)
    a = torch.randn(m, k, device="cuda", generator=g).bfloat16()
    bt = torch.randn(n, k, device="cuda", generator=g).bfloat16()
    b = bt.t() if b_layout == "nk" else bt.t().contiguous()
    out = None
    if out_layout == "row":
        out = torch.full((m, n), float("nan"), device="cuda")
    elif out_layout == "col":
        out = torch.full((n, m), float("nan"), device="cuda").t()
    got = tylo.ops.gemm(a, b, out=out, alpha=0.5, relu=True)
    if out is not None:
        assert got is out
    torch.cuda.synchronize()
    assert _rel(_np(got), gemm_ref(_np(a), _np(b), 0.5, True)) <= 1e-2


def test_gemm_bf16_out_on_hopper(gpu_runtime):
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip(
            "bf16 out runs on the Hopper path (needs sm_90; found "
            f"{torch.cuda.get_device_capability()})"
        )
    a = torch.randn(300, 200, device="cuda").bfloat16()
    b = torch.randn(128, 200, device="cuda").bfloat16().t()
    got = tylo.ops.gemm(a, b, out_dtype=torch.bfloat16)
    assert got.dtype == torch.bfloat16
    assert _rel(_np(got), gemm_ref(_np(a), _np(b))) <= 1e-2


def _bf16_bits(x: np.ndarray) -> np.ndarray:
    u = np.ascontiguousarray(x, np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def _bf16_values(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def test_gemm_device_buffers(gpu_runtime):
    rng = np.random.default_rng()
    m, n, k = 77, 129, 96
    abits = _bf16_bits(rng.standard_normal((m, k)))
    btbits = _bf16_bits(rng.standard_normal((n, k)))
    a = DeviceBuffer.from_numpy(abits, dtype=tylo.bf16)
    bt = DeviceBuffer.from_numpy(btbits, dtype=tylo.bf16)
    b = DeviceArray(bt.ptr, (k, n), (1, k), tylo.bf16, 0, owner=bt)  # the transposed view
    out = DeviceBuffer.empty((m, n), tylo.f32).fill_bytes(0xFF)  # NaN
    assert tylo.ops.gemm(a, b, out=out) is out
    want = gemm_ref(_bf16_values(abits), _bf16_values(btbits).T)
    assert _rel(out.to_numpy().astype(np.float64), want) <= 1e-2


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(("lq", "lk"), [(200, 333), (128, 128), (1, 77)])
def test_attention_torch(gpu_runtime, d, causal, lq, lk):
    q = torch.randn(2, 3, lq, d, device="cuda").bfloat16()
    k = torch.randn(2, 3, lk, d, device="cuda").bfloat16()
    v = torch.randn(2, 3, lk, d, device="cuda").bfloat16()
    lens = torch.tensor([lk, max(lk // 2, 1)], dtype=torch.int32, device="cuda")
    out = torch.full_like(q, float("nan"))
    o, lse = tylo.ops.attention(q, k, v, causal=causal, kv_lens=lens, out=out, return_lse=True)
    assert o is out
    torch.cuda.synchronize()
    wo, wl = attention_ref(_np(q), _np(k), _np(v), causal, lens.cpu().numpy())
    got = _np(o)
    assert np.isfinite(got).all()
    assert np.abs(got - wo).max() <= 2e-2 * max(np.abs(wo).max(), 1.0)
    gl = _np(lse)
    assert (np.isneginf(gl) == np.isneginf(wl)).all()
    fin = np.isfinite(wl)
    assert np.abs(gl[fin] - wl[fin]).max() <= 1e-2


def test_attention_device_buffers(gpu_runtime):
    rng = np.random.default_rng()
    shape = (1, 2, 100, 64)
    bits = [_bf16_bits(rng.standard_normal(shape)) for _ in range(3)]
    q, k, v = (DeviceBuffer.from_numpy(x, dtype=tylo.bf16) for x in bits)
    o = tylo.ops.attention(q, k, v, causal=True)
    got = _bf16_values(o.to_numpy()).astype(np.float64)
    want, _ = attention_ref(*(_bf16_values(x) for x in bits), causal=True)
    assert np.abs(got - want).max() <= 2e-2 * max(np.abs(want).max(), 1.0)


@pytest.mark.parametrize(("rows", "cols"), [(1, 1), (33, 1000), (512, 4096), (7, 33)])
@pytest.mark.parametrize("masked", [False, True])
def test_softmax_torch(gpu_runtime, rows, cols, masked):
    x = torch.randn(rows, cols, device="cuda")
    x[0, 0] = float("-inf")
    mask = (torch.rand(rows, cols, device="cuda") > 0.3) if masked else None
    if masked:
        mask[-1] = False  # a row with nothing kept gives zeros
    got = tylo.ops.softmax(x, mask=mask)
    torch.cuda.synchronize()
    want = softmax_ref(_np(x), None if mask is None else mask.cpu().numpy())
    assert np.abs(_np(got) - want).max() <= 1e-5


def test_softmax_device_buffers(gpu_runtime):
    x = np.random.default_rng().standard_normal((40, 300)).astype(np.float32)
    got = tylo.ops.softmax(DeviceBuffer.from_numpy(x)).to_numpy()
    assert np.abs(got - softmax_ref(x)).max() <= 1e-5


# ------------------------------------------------------------------ torch's current stream


def _busy_side_stream_call(call, stream_kw):
    """On a busy side stream, write the input just before ``call``; returns (got, fresh)."""
    s = torch.cuda.Stream()
    a_old = torch.randn(128, 64, device="cuda").bfloat16()
    a_new = torch.randn(128, 64, device="cuda").bfloat16()
    a = a_old.clone()
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        torch.cuda._sleep(SLEEP)
        a.copy_(a_new)
        got = call(a, **stream_kw)
    torch.cuda.synchronize()
    return got, a_new, a_old


OPS_ON_A = {
    "gemm": (
        lambda a, **kw: tylo.ops.gemm(a, B64.t(), **kw),
        lambda a: gemm_ref(_np(a), _np(B64.t())),
    ),
    "attention": (
        lambda a, **kw: tylo.ops.attention(a.view(1, 1, 128, 64), K64, K64, **kw),
        lambda a: attention_ref(_np(a.view(1, 1, 128, 64)), _np(K64), _np(K64))[0],
    ),
    "softmax": (lambda a, **kw: tylo.ops.softmax(a.float(), **kw), lambda a: softmax_ref(_np(a))),
}
B64 = K64 = None


@pytest.fixture
def operands():
    global B64, K64
    B64 = torch.randn(96, 64, device="cuda").bfloat16()
    K64 = torch.randn(1, 1, 200, 64, device="cuda").bfloat16()


@pytest.mark.parametrize("name", sorted(OPS_ON_A))
def test_ops_follow_torchs_current_stream(gpu_runtime, operands, name):
    call, ref = OPS_ON_A[name]
    call(torch.randn(128, 64, device="cuda").bfloat16())  # compiled before the timing
    torch.cuda.synchronize()
    got, a_new, _ = _busy_side_stream_call(call, {})
    assert _rel(_np(got), ref(a_new)) <= 2e-2


def test_the_stream_test_can_fail(gpu_runtime, operands):
    """The same gemm on the legacy stream (``stream=0``) does not wait for the side stream:
    it reads the input before the copy, so the side-stream test above means something."""
    call, ref = OPS_ON_A["gemm"]
    call(torch.randn(128, 64, device="cuda").bfloat16())
    torch.cuda.synchronize()
    got, a_new, a_old = _busy_side_stream_call(call, {"stream": 0})
    assert _rel(_np(got), ref(a_old)) <= 2e-2 and _rel(_np(got), ref(a_new)) > 0.1


def test_raw_launch_follows_torchs_current_stream(gpu_runtime):
    from examples.vector_add.kernel import vector_add

    n = 1 << 20
    a, b = torch.zeros(n, device="cuda"), torch.ones(n, device="cuda")
    c = torch.full((n,), float("nan"), device="cuda")
    vector_add[(n + 255) // 256, 256](c, a, b, n)
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(SLEEP)
        a.fill_(2.0)
        vector_add[(n + 255) // 256, 256](c, a, b, n)
    torch.cuda.synchronize()
    assert bool((c == 3.0).all())


# ------------------------------------------------------------------ CUDA graphs


@pytest.mark.parametrize("name", sorted(OPS_ON_A))
def test_graph_capture_and_replay(gpu_runtime, operands, name):
    call, ref = OPS_ON_A[name]
    a = torch.randn(128, 64, device="cuda").bfloat16()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        call(a)  # the warm-up: compiles, plans, allocates what the capture reuses
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = call(a)
    for _ in range(2):
        a.copy_(torch.randn(128, 64, device="cuda").bfloat16())
        out.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        assert _rel(_np(out), ref(a)) <= 2e-2


def _forget_softmax_specializations():
    """Drop this process's specializations and launchers of the softmax kernels, so that
    the next call must specialize again whatever ran in this worker before (a softmax of
    another shape may share the specialization: rows and columns are runtime values)."""
    from tylo.kernel import Kernel
    from tylo.ops.softmax import kernel as softmax_kernels

    for k in vars(softmax_kernels).values():
        if isinstance(k, Kernel):
            k.cache.clear()
            k._built.clear()
            k._launchers.clear()


def test_capture_of_a_shape_never_warmed_is_a_typed_error(gpu_runtime):
    a = torch.randn(37, 53, device="cuda")
    _forget_softmax_specializations()  # never warmed in this process
    g = torch.cuda.CUDAGraph()
    with pytest.raises(CaptureError, match="warm"):
        with torch.cuda.graph(g):
            tylo.ops.softmax(a)
    # the process and the stream are still usable: the same call eagerly, then captured
    want = softmax_ref(_np(a))
    assert np.abs(_np(tylo.ops.softmax(a)) - want).max() <= 1e-5
    g2 = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g2):
        out = tylo.ops.softmax(a)
    g2.replay()
    torch.cuda.synchronize()
    assert np.abs(_np(out) - want).max() <= 1e-5


# ------------------------------------------------------------------ custom ops


def test_opcheck_each_custom_op(gpu_runtime):
    import tylo.ops.torch_library  # noqa: F401 - registers torch.ops.tylo.*

    a = torch.randn(64, 96, device="cuda").bfloat16()
    b = torch.randn(80, 96, device="cuda").bfloat16().t()
    q = torch.randn(1, 2, 64, 64, device="cuda").bfloat16()
    x = torch.randn(16, 100, device="cuda")
    for op, args in (
        (torch.ops.tylo.gemm.default, (a, b, 1.0, False, None)),
        (torch.ops.tylo.attention.default, (q, q, q, True, None, None)),
        (torch.ops.tylo.softmax.default, (x, None)),
    ):
        torch.library.opcheck(op, args)


def test_torch_compile_fullgraph(gpu_runtime):
    import tylo.ops.torch_library  # noqa: F401

    def f(a, b, q, x):
        y = torch.ops.tylo.gemm(a, b, 2.0, True, None)
        o, lse = torch.ops.tylo.attention(q, q, q, False, None, None)
        return y.sum() + o.float().sum() + torch.ops.tylo.softmax(x + 1.0, None)

    a = torch.randn(64, 96, device="cuda").bfloat16()
    b = torch.randn(80, 96, device="cuda").bfloat16().t()
    q = torch.randn(1, 2, 64, 64, device="cuda").bfloat16()
    x = torch.randn(16, 100, device="cuda")
    eager = f(a, b, q, x)
    compiled = torch.compile(f, fullgraph=True)(a, b, q, x)
    torch.cuda.synchronize()
    assert torch.allclose(eager, compiled, rtol=1e-4, atol=1e-3)


def test_a_backward_says_it_is_not_implemented(gpu_runtime):
    import tylo.ops.torch_library as tl

    x = torch.randn(4, 32, device="cuda", requires_grad=True)
    y = torch.ops.tylo.softmax(x, None)
    with pytest.raises(tl.NotDifferentiableError, match="no backward"):
        y.sum().backward()
