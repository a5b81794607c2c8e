"""tylo's ops as PyTorch custom ops: ``torch.ops.tylo.gemm``, ``torch.ops.tylo.attention``
and ``torch.ops.tylo.softmax``, each with a fake (meta) implementation, so that
``torch.compile`` traces through them without a graph break and ``torch.library.opcheck``
can check them. Importing this module registers them (it needs torch: ``pip install
'tylo[torch]'``); importing it twice registers them once.

>>> import torch, tylo.ops.torch_library                    # doctest: +SKIP
>>> torch.ops.tylo.gemm(a, b, 1.0, False, None)             # doctest: +SKIP

Each op allocates its outputs with torch (so a CUDA-graph capture takes them from its
private pool) and launches on torch's current stream. Gradients are not implemented yet:
a backward through any of them raises :class:`NotDifferentiableError`.
"""

# no `from __future__ import annotations`: torch.library reads these annotations as types
from typing import Optional, Tuple

import torch

from tylo.errors import TyloError

__all__ = ["NotDifferentiableError", "attention", "gemm", "softmax"]


class NotDifferentiableError(TyloError, RuntimeError):
    """A gradient was requested through a tylo op that has no backward yet."""


def _no_backward(name: str):  # noqa: ANN202 - torch's autograd signature
    def backward(ctx, *grads):  # noqa: ANN001, ANN202
        raise NotDifferentiableError(
            f"torch.ops.tylo.{name} has no backward pass yet: tylo's ops are forward-only "
            "for now; detach its inputs, or use a differentiable op for training"
        )

    return backward


def _setup(ctx, inputs, output) -> None:  # noqa: ANN001
    pass


def _dtype_name(dt: Optional[torch.dtype]) -> Optional[str]:
    return (
        None
        if dt is None
        else {torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16"}.get(dt, str(dt))
    )


@torch.library.custom_op("tylo::gemm", mutates_args=())
def gemm(
    a: torch.Tensor,
    b: torch.Tensor,
    alpha: float = 1.0,
    relu: bool = False,
    out_dtype: Optional[torch.dtype] = None,
) -> torch.Tensor:
    """``alpha * a @ b`` (ReLU'd with ``relu``): :func:`tylo.ops.gemm`, as a custom op."""
    from tylo.ops.gemm.api import gemm as run

    return run(a, b, alpha=alpha, relu=relu, out_dtype=_dtype_name(out_dtype))


@gemm.register_fake
def _(a, b, alpha=1.0, relu=False, out_dtype=None):  # noqa: ANN001, ANN202
    torch._check(
        a.dim() == 2 and b.dim() == 2 and a.shape[1] == b.shape[0],
        lambda: "tylo::gemm: a (M, K) and b (K, N)",
    )
    return a.new_empty((a.shape[0], b.shape[1]), dtype=out_dtype or torch.float32)


@torch.library.custom_op("tylo::attention", mutates_args=())
def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    kv_lens: Optional[torch.Tensor] = None,
    scale: Optional[float] = None,
) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(out, lse)`` of :func:`tylo.ops.attention`, as a custom op."""
    from tylo.ops.attention.api import attention as run

    return run(q, k, v, causal=causal, kv_lens=kv_lens, scale=scale, return_lse=True)


@attention.register_fake
def _(q, k, v, causal=False, kv_lens=None, scale=None):  # noqa: ANN001, ANN202
    torch._check(q.dim() == 4, lambda: "tylo::attention: q must be (B, H, Lq, D)")
    return torch.empty_like(q, memory_format=torch.contiguous_format), q.new_empty(
        q.shape[:3], dtype=torch.float32
    )


@torch.library.custom_op("tylo::softmax", mutates_args=())
def softmax(x: torch.Tensor, mask: Optional[torch.Tensor] = None) -> torch.Tensor:
    """Row softmax of :func:`tylo.ops.softmax`, as a custom op."""
    from tylo.ops.softmax.api import softmax as run

    return run(x, mask=mask)


@softmax.register_fake
def _(x, mask=None):  # noqa: ANN001, ANN202
    return torch.empty_like(x, memory_format=torch.contiguous_format)


for _op, _name in ((gemm, "gemm"), (attention, "attention"), (softmax, "softmax")):
    _op.register_autograd(_no_backward(_name), setup_context=_setup)
