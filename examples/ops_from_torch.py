"""Calling tylo's kernels from PyTorch: a walkthrough of ``tylo.ops``.

    python examples/ops_from_torch.py            # runs on a GPU with torch; plans without

Each op takes and returns arrays in torch's conventions. Before it launches anything it
plans: picks a configuration and proves what the kernel relies on (copies unique and
aligned, ldmatrix rows contiguous). Without a GPU (or torch) this walkthrough stops there
and prints the plans; with one it runs each op on fresh data and compares it with torch.
"""

from __future__ import annotations

import sys

import tylo
import tylo.ops
from tylo.ops.attention.config import attention_config
from tylo.ops.gemm.host import choose_config as gemm_config
from tylo.ops.softmax.plan import choose_config as softmax_config


def show_plans() -> None:
    """What each op would run at one size, and what planning proved (no GPU needed)."""
    # 1. GEMM: A (M, K) row-major, B (N, K) row-major seen as (K, N); 16-byte rows
    g = gemm_config(4096, 4096, 4096, 4096, 4096, ldd=4096, dtype=tylo.bf16)
    print(f"gemm 4096^3: {g.describe()}")
    for what, verdict in g.proofs.items():
        print(f"  {what}: {getattr(verdict, 'status', verdict)}")
    # 2. attention: the warp path's tile for D = 128 (the Hopper path plans its own)
    a = attention_config(128, "bf16")
    print(f"attention D=128: {a.describe()}")
    for what, verdict in a.proofs.items():
        print(f"  {what}: {getattr(verdict, 'status', verdict)}")
    # 3. softmax: the ownership style chosen for 4096-element f32 rows
    s = softmax_config(512, 4096, vec=4)
    print(f"softmax 512x4096: {s.describe()}")


def run_on_gpu() -> None:
    """Each op on fresh data against torch, on torch's current stream."""
    import torch

    a = torch.randn(1000, 512, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(768, 512, device="cuda", dtype=torch.bfloat16)  # a weight, (N, K)
    d = tylo.ops.gemm(a, w.t(), alpha=0.5)  # w.t() is (K, N) with unit row stride: no copy
    want = 0.5 * (a.double() @ w.double().t())
    print(f"gemm: max error {float((d.double() - want).abs().max()):.3g} (f32 out)")

    q, k, v = (torch.randn(2, 8, 1000, 64, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    o = tylo.ops.attention(q, k, v, causal=True)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    print(f"attention: max error {float((o.float() - ref.float()).abs().max()):.3g} vs SDPA")

    x = torch.randn(512, 4096, device="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):  # tylo launches on the current stream, as torch does
        p = tylo.ops.softmax(x)
    s.synchronize()
    print(f"softmax: max error {float((p - x.softmax(-1)).abs().max()):.3g}")

    g = torch.cuda.CUDAGraph()  # after the calls above (the warm-up), a capture replays them
    with torch.cuda.graph(g):
        p = tylo.ops.softmax(x)
    x.copy_(torch.randn_like(x))
    g.replay()
    torch.cuda.synchronize()
    print(
        f"softmax replayed from a CUDA graph: max error "
        f"{float((p - x.softmax(-1)).abs().max()):.3g}"
    )


def main() -> int:
    show_plans()
    try:
        import torch
    except ImportError:
        print("torch is not installed: planned, not run (pip install 'tylo[torch]')")
        return 0
    if not torch.cuda.is_available():
        print("no GPU found: planned, not run")
        return 0
    run_on_gpu()
    return 0


if __name__ == "__main__":
    sys.exit(main())
