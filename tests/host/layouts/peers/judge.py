"""Judge one peer case: run tylo, check the result by its defining property (brute force),
compare the exact form where the peer states one, and classify a refusal by searching for
a result.

Outcomes: ``pass`` (the result has the defining property), ``wrong`` (a result without
it: silently wrong), ``refused_correct`` (no result exists), ``refused_stricter`` (a
result exists in the peer's sense but tylo's documented definition deliberately refuses:
the reason is listed), ``refused_wrongly`` (a result exists; tylo must return it),
``refused_unverified`` (the operands are too large to search), ``crash`` (an untyped
exception).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.host.layouts.peers import brute
from tests.host.layouts.peers.cases import Case, SymbolicCase
from tylo.layouts import (
    ComposedLayout,
    Layout,
    LayoutError,
    Swizzle,
    UndecidableError,
    complement,
    composition,
    dim,
    left_inverse,
    logical_divide,
    logical_product,
    make_layout,
    parse,
    right_inverse,
    substitute,
)
from tylo.layouts import coalesce as tylo_coalesce

__all__ = [
    "Verdict",
    "admissible",
    "chains",
    "complement_ok",
    "judge",
    "judge_symbolic",
    "without_zero_strides",
]

OPS = {
    "coalesce": tylo_coalesce,
    "complement": complement,
    "composition": composition,
    "left_inverse": left_inverse,
    "right_inverse": right_inverse,
    "logical_divide": logical_divide,
    "logical_product": logical_product,
}


@dataclass(frozen=True)
class Verdict:
    """The judgement of one case: ``outcome`` (see the module docstring), ``exact`` (True or
    False where the peer states a form, else None), ``detail`` (why, in words)."""

    source: str
    text: str
    outcome: str
    exact: bool | None
    detail: str
    result: str = ""


def operand(x: Any, symbols: Any = None) -> Any:
    """A case operand: CuTe text, an int or a shape tuple (left as is)."""
    return parse(x, symbols) if isinstance(x, str) else x


def without_zero_strides(x: Layout) -> Layout:
    """``x`` with every stride-0 mode given extent 1 (the part complement works on)."""
    fs, fd = brute.flat(x.shape), brute.flat(x.stride)
    return Layout(tuple(1 if d == 0 else s for s, d in zip(fs, fd)), fd)


def _cotarget(c: Any) -> int:
    if type(c) is tuple:
        n = 1
        for s in brute.flat(c):
            n *= s
        return n
    return c


def _is_flat(x: Layout) -> bool:
    return type(x.shape) is int or all(type(s) is int for s in x.shape)


def _same_values(r: Any, f: list[int]) -> bool:
    return brute.size_of(r) == len(f) and brute.values(r) == f


# ---- defining properties ------------------------------------------------------------


def coalesce_ok(x: Layout, r: Any, minimal: bool = True) -> tuple[bool, str]:
    """Same function, depth <= 1 (CuTe), and (``minimal``) no extent-1 mode and no
    mergeable pair (tylo's 'fewest modes')."""
    if type(r) is not Layout or not _is_flat(r):
        return False, f"result {r} is not a flat Layout"
    if not _same_values(r, brute.values(x)):
        return False, "coalesce(L)(i) != L(i) for some i"
    if not minimal:
        return True, ""
    fs, fd = brute.flat(r.shape), brute.flat(r.stride)
    if len(fs) > 1 and any(s == 1 for s in fs):
        return False, f"{r} keeps an extent-1 mode"
    if any(fd[k + 1] == fs[k] * fd[k] for k in range(len(fs) - 1)):
        return False, f"{r} has a mergeable pair of modes"
    return True, ""


def complement_ok(x: Layout, cotarget: int, r: Any) -> tuple[bool, str]:
    """tylo's definition with CuTe's checks: R ordered (strictly increasing), (L0, R)
    injective (L0: L without stride-0 modes), the image of (L0, R) covers [0, cotarget),
    ``cosize(R) <= round_up(cotarget, reach(L))`` (``reach``: the largest extent*stride of
    L's modes, what CuTe's construction rounds the last mode up to; CuTe's test states the
    bound with cosize(L), which its own algorithm exceeds, e.g. complement(2:3, 8) =
    (3,2):(1,6) has cosize 9 > round_up(8, 4)), and CuTe's size observations."""
    if type(r) is not Layout:
        return False, f"result {r!r} is not a Layout"
    rv = brute.values(r)
    if any(a >= b for a, b in zip(rv, rv[1:])):
        return False, "R is not ordered"
    base = brute.values(without_zero_strides(x))
    sums = {b + v for v in rv for b in base}
    if len(sums) != len(rv) * len(base):
        return False, "(L, R) is not injective"
    if not set(range(cotarget)) <= sums:
        return False, f"(L, R) does not cover [0, {cotarget})"
    fs, fd = brute.flat(x.shape), brute.flat(x.stride)
    reach = max([s * abs(d) for s, d in zip(fs, fd) if s > 1 and d != 0] or [1])
    if rv[-1] + 1 > -(-cotarget // reach) * reach:
        return False, "cosize(R) > round_up(cotarget, reach(L))"
    n_filtered = len(set(base))
    if len(rv) < cotarget // n_filtered or rv[-1] + 1 < cotarget // n_filtered:
        return False, "size(R) or cosize(R) < cotarget / size(filter(L))"
    return True, ""


def composition_ok(a: Any, b: Any, r: Any) -> tuple[bool, str]:
    """``compatible(B, R)`` and ``R(c) == A(B(c))`` for every index c of B (A extended past
    its domain along its last mode; a negative index into A split with floor or with
    C's truncation, CuTe's convention)."""
    rin = r.inner if isinstance(r, ComposedLayout) else r
    bin_ = b.inner if isinstance(b, ComposedLayout) else b
    if not isinstance(rin, Layout):
        return False, f"result {r!r} is not a layout"
    if not brute.compatible(bin_.shape, rin.shape):
        return False, f"shape of {r} is not compatible with shape of {b}"
    got = brute.values(r)
    for trunc in (False, True):
        if got == [brute.ev(a, brute.ev(b, i), trunc) for i in range(brute.size_of(b))]:
            return True, ""
    return False, "R(c) != A(B(c)) for some c"


def _evaluable(r: Any) -> bool:
    """A Layout, or a swizzle after a layout (``S o L``, how tylo returns the inverse of a
    swizzled layout): both evaluated by ``brute.ev``."""
    return type(r) is Layout or (
        isinstance(r, ComposedLayout) and isinstance(r.outer, Swizzle) and type(r.inner) is Layout
    )


def left_inverse_ok(x: Any, r: Any) -> tuple[bool, str]:
    """``R(L(i)) == i`` for every index i of L, each offset ``L(i)`` in R's domain
    ``[0, size(R))`` (tylo's definition; L and R may be swizzled, ``brute.ev``)."""
    if not _evaluable(r):
        return False, f"result {r!r} is not a layout or a swizzled layout"
    n = brute.size_of(r)
    for i, v in enumerate(brute.values(x)):
        if not 0 <= v < n:
            return False, f"offset L({i}) = {v} is outside R's domain [0, {n})"
        if brute.ev(r, v) != i:
            return False, f"R(L({i})) = R({v}) = {brute.ev(r, v)} != {i}"
    return True, ""


def right_inverse_ok(x: Any, r: Any) -> tuple[bool, str]:
    """``L(R(i)) == i`` for every ``i < size(R)``, each ``R(i)`` an index of L (L and R
    may be swizzled, ``brute.ev``)."""
    if not _evaluable(r):
        return False, f"result {r!r} is not a layout or a swizzled layout"
    n = brute.size_of(x)
    for i, v in enumerate(brute.values(r)):
        if not 0 <= v < n:
            return False, f"R({i}) = {v} is not an index of L ([0, {n}))"
        if brute.ev(x, v) != i:
            return False, f"L(R({i})) = L({v}) = {brute.ev(x, v)} != {i}"
    return True, ""


def _mode(r: Layout, i: int) -> Layout:
    return Layout(r.shape[i], r.stride[i])


def _complements(x: Layout, n: int) -> list[Layout] | None:
    """Candidate complements of ``x`` for ``n``, each judged by ``complement_ok`` (brute
    force): tylo's own when it gives one with the property, else every ordered layout the
    brute-force search finds (None: too large to search)."""
    try:
        c = complement(x, n)
    except LayoutError:
        c = None
    if c is not None and complement_ok(x, n, c)[0]:
        return [c]
    return brute.complement_candidates(x, n)


def divide_ok(a: Layout, b: Layout, r: Any) -> tuple[bool, str]:
    """rank 2; mode 0 is ``composition(A, B)`` (compatible with B, same function); the
    whole is ``A o (B, C)`` for some C with the complement's defining property for B and
    ``size(A)`` (brute force; never a C that only tylo vouches for)."""
    if type(r) is not Layout or type(r.shape) is not tuple or len(r.shape) != 2:
        return False, f"result {r} is not a rank-2 Layout"
    ok, why = composition_ok(a, b, _mode(r, 0))
    if not ok:
        return False, f"mode 0: {why}"
    cands = _complements(b, brute.size_of(a))
    if cands is None:
        return False, f"no complement of B for {brute.size_of(a)} verified (search too large)"
    for c in cands:
        if composition_ok(a, make_layout(b, c), r)[0]:
            return True, ""
    return False, f"R is A o (B, C) for no complement C of B for {brute.size_of(a)}"


def product_ok(a: Layout, b: Layout, r: Any) -> tuple[bool, str]:
    """rank 2; mode 0 is A (as a function); mode 1 is ``C o B`` for some C with the
    complement's defining property for A and ``size(A)*cosize(B)`` (brute force);
    injective when A and B are."""
    if type(r) is not Layout or type(r.shape) is not tuple or len(r.shape) != 2:
        return False, f"result {r} is not a rank-2 Layout"
    if not _same_values(_mode(r, 0), brute.values(a)):
        return False, "mode 0 is not A"
    n = brute.size_of(a) * brute.cosize_of(b)
    cands = _complements(a, n)
    if cands is None:
        return False, f"no complement of A for {n} verified (search too large)"
    if not any(composition_ok(c, b, _mode(r, 1))[0] for c in cands):
        return False, f"mode 1 is C o B for no complement C of A for {n}"
    if brute.is_injective(a) and brute.is_injective(b) and not brute.is_injective(r):
        return False, "A and B are injective but the product is not"
    return True, ""


def check(op: str, args: tuple, r: Any, minimal: bool = True) -> tuple[bool, str]:
    """The defining property of ``op(*args) == r`` (``minimal``: coalesce's fewest modes
    too)."""
    if op == "coalesce":
        return coalesce_ok(args[0], r, minimal)
    if op == "complement":
        # judged by its defining properties alone (brute force): never by tylo's own
        # complement((L, R)), which refuses the inadmissible pairs a complement may form
        return complement_ok(args[0], _cotarget(args[1]), r)
    if op == "composition":
        return composition_ok(args[0], args[1], r)
    if op == "left_inverse":
        return left_inverse_ok(args[0], r)
    if op == "right_inverse":
        return right_inverse_ok(args[0], r)
    b = args[1] if isinstance(args[1], Layout) else Layout(args[1])
    if op == "logical_divide":
        return divide_ok(args[0], b, r)
    return product_ok(args[0], b, r)


# ---- exact forms --------------------------------------------------------------------


def exact(op: str, args: tuple, r: Any, expect: Any) -> bool | None:
    """Whether tylo's form equals the peer's stated one (None: the peer states none)."""
    if op == "logical_product":
        # CuTe states layout<0>(R) == A
        return type(r) is Layout and _mode(r, 0) == args[0]
    if op == "complement" and isinstance(args[0], Layout):
        # CuTe states complement(complement(R, cosize(L)), cotarget) == R
        try:
            back = complement(complement(r, brute.cosize_of(args[0])), args[1])
        except LayoutError:
            return False
        return back == r
    if expect is None:
        return None
    if type(expect) is dict:
        return all(_mode(r, i) == parse(t) for i, t in expect.items())
    return r == parse(expect)


# ---- refusals -----------------------------------------------------------------------


def _exists(op: str, args: tuple) -> tuple[bool | None, str]:
    """Whether a result with the defining property exists (brute force), and a note."""
    if op == "coalesce":
        return True, "every layout has a coalesced form"
    if op == "complement":
        cands = brute.complement_candidates(args[0], _cotarget(args[1]))
        if cands is None:
            return None, "too large to search"
        return bool(cands), f"e.g. {cands[0]}" if cands else "none"
    if op == "composition":
        a, b = args
        bs = (b.inner if isinstance(b, ComposedLayout) else b).shape
        for trunc in (False, True):
            f = [brute.ev(a, brute.ev(b, i), trunc) for i in range(brute.size_of(b))]
            if brute.layout_with_shape_exists(bs, f):
                return True, "a layout with B's (refined) shape equals A o B"
        return False, "A o B is no layout with B's (refined) shape"
    if op == "left_inverse":
        found = brute.left_inverse_exists(args[0])
        return found, {True: "found one", False: "none", None: "too large to search"}[found]
    if op == "right_inverse":
        return True, "1:0 always is one"
    b = args[1] if isinstance(args[1], Layout) else Layout(args[1])
    a = args[0]
    if op == "logical_divide":
        cands = brute.complement_candidates(b, brute.size_of(a))
        if cands is None:
            return None, "too large to search"
        for c in cands:
            whole = make_layout(b, c)
            f = [brute.ev(a, brute.ev(whole, i)) for i in range(brute.size_of(whole))]
            if brute.layout_with_shape_exists(whole.shape, f):
                return True, f"with complement {c}"
        return False, "no complement of B makes A o (B, C) a layout"
    cands = brute.complement_candidates(a, brute.size_of(a) * brute.cosize_of(b))
    if cands is None:
        return None, "too large to search"
    for c in cands:
        f = [brute.ev(c, brute.ev(b, i)) for i in range(brute.size_of(b))]
        if brute.layout_with_shape_exists(b.shape, f):
            return True, f"with complement {c}"
    return False, "no complement of A makes C o B a layout"


def chains(x: Any) -> bool:
    """Whether the modes of ``x`` of extent > 1, sorted by stride, have positive strides
    each dividing the next and reaching (extent*stride) at most the next: the layouts
    tylo's left_inverse constructs one for (docs/layouts.md)."""
    if not isinstance(x, Layout):
        return False
    modes = sorted((d, s) for s, d in zip(brute.flat(x.shape), brute.flat(x.stride)) if s != 1)
    if any(d <= 0 for d, _ in modes):
        return False
    return all(d1 % d0 == 0 and s0 * d0 <= d1 for (d0, s0), (d1, _) in zip(modes, modes[1:]))


def admissible(x: Any) -> bool:
    """Whether the modes of ``x`` with extent > 1 and stride != 0, sorted by stride, have
    each stride a multiple of the previous mode's reach (complement's condition)."""
    if not isinstance(x, Layout):
        return False
    modes = sorted(
        (d, s) for s, d in zip(brute.flat(x.shape), brute.flat(x.stride)) if s != 1 and d != 0
    )
    if any(d < 0 for d, _ in modes):
        return False
    return all(d1 % (s0 * d0) == 0 for (d0, s0), (d1, _) in zip(modes, modes[1:]))


def _stricter(op: str, args: tuple, err: Exception) -> str | None:
    """The documented reason tylo deliberately refuses a case that has a result in the
    peer's sense, or None."""
    composed = [isinstance(x, ComposedLayout) for x in args]
    if op == "left_inverse" and not brute.is_injective(args[0]):
        return (
            "left_inverse is defined by R(L(i)) == i, for injective L only "
            "(docs/layouts.md); CuTe checks only L(R(L(i))) == L(i)"
        )
    if op == "left_inverse" and not composed[0] and min(brute.values(args[0])) < 0:
        return (
            "left_inverse's R is defined on offsets [0, size(R)) (docs/layouts.md), which "
            "a negative stride leaves; CuTe evaluates R at negative offsets"
        )
    if op == "left_inverse" and not composed[0] and not chains(args[0]):
        return (
            "tylo constructs left inverses only when the sorted strides divide each other "
            "and each mode's reach is at most the next stride (docs/layouts.md); a search "
            "finds one here"
        )
    if op in ("left_inverse", "right_inverse") and composed[0]:
        return (
            "tylo returns the inverse of S o L only as S' o Q for a swizzle S' (inverse.py, "
            "docs/layouts.md); CuTe returns any composed inverse"
        )
    if op in ("complement", "logical_divide", "logical_product") and not any(composed):
        x = args[0] if op != "logical_divide" else args[1]
        x = x if isinstance(x, Layout) else Layout(x)
        if not admissible(x):
            return (
                "complement of a layout that is not admissible: tylo tries the gaps below "
                "the cotarget and CuTe's construction with gaps rounded down, each checked, "
                "and does not search further (docs/layouts.md); a search finds one here"
            )
    if op == "composition" and composed[1]:
        return "a layout after a swizzle is refused (compose.py); CuTe returns a composed one"
    if op == "composition" and any(d < 0 for d in brute.flat(args[1].stride)):
        return (
            "a right operand reaching negative indices of A, where CuTe's truncating and "
            "floor division disagree, is refused (docs/proofs.md, Peer parity)"
        )
    return None


def _claims_none(err: Exception) -> bool:
    text = str(err).lower()
    return "no " in text and "exists" in text


def judge(source: str, case: Case) -> Verdict:
    """Run ``case`` through tylo and classify it."""
    args = tuple(operand(x) for x in case.args)
    text = f"{case.op}({', '.join(str(x) for x in case.args)})"
    try:
        r = OPS[case.op](*args)
    except LayoutError as err:
        exists, note = _exists(case.op, args)
        if exists is False and any(isinstance(x, ComposedLayout) for x in args):
            # no plain layout, but CuTe's composed result exists
            exists = True
        if case.op == "left_inverse" and not brute.is_injective(args[0]):
            # tylo's claim (no R with R(L(i)) == i) is true; CuTe's weaker inverse exists
            return Verdict(source, text, "refused_stricter", None, _stricter(case.op, args, err))
        if exists is False:
            return Verdict(source, text, "refused_correct", None, f"{note}; {err}")
        if exists is None:
            return Verdict(source, text, "refused_unverified", None, f"{note}; {err}")
        reason = _stricter(case.op, args, err)
        if reason and not _claims_none(err):
            return Verdict(source, text, "refused_stricter", None, reason)
        why = "the message claims none exists" if _claims_none(err) else "no documented reason"
        return Verdict(source, text, "refused_wrongly", None, f"{note} ({why}); {err}")
    except Exception as err:  # noqa: BLE001 - an untyped error is the finding
        return Verdict(source, text, "crash", None, f"{type(err).__name__}: {err}")
    ok, why = check(case.op, args, r)
    ex = exact(case.op, args, r, case.expect) if ok else None
    if case.peer_refuses and ok:
        why = "the peer expects a refusal; tylo's result has the defining property"
    return Verdict(source, text, "pass" if ok else "wrong", ex, why, str(r))


def _check_uniform(case: SymbolicCase, syms: dict) -> None:
    """The data's uniform form must have the defining property at every value (else the
    case data is wrong, and a refusal cannot be called wrong)."""
    sym_args = tuple(syms["N"] if x == "N" else operand(x, syms) for x in case.args)
    for v in case.values:
        args = tuple(operand(substitute(x, {"N": v})) for x in sym_args)
        ok, why = check(case.op, args, parse(case.uniform.replace("N", f"({v})")))
        if not ok:
            raise AssertionError(f"case data: {case.uniform} at N={v} is wrong: {why}")


def judge_symbolic(case: SymbolicCase) -> Verdict:
    """Run ``case`` with ``N`` a symbol and judge the result at each value of N."""
    syms = {"N": dim("N", multiple_of=case.multiple_of)}
    args = tuple(syms["N"] if x == "N" else operand(x, syms) for x in case.args)
    text = (
        f"{case.op}({', '.join(str(x) for x in case.args)}) with N = "
        f"dim('N', multiple_of={case.multiple_of})"
    )
    try:
        r = OPS[case.op](*args)
    except UndecidableError as err:
        if case.uniform is None:
            return Verdict(case.source, text, "refused_correct", None, f"form depends: {err}")
        _check_uniform(case, syms)
        return Verdict(case.source, text, "refused_wrongly", None, f"{case.uniform}; {err}")
    except LayoutError as err:
        return Verdict(case.source, text, "refused_wrongly", None, str(err))
    except Exception as err:  # noqa: BLE001
        return Verdict(case.source, text, "crash", None, f"{type(err).__name__}: {err}")
    for v in case.values:
        static_args = tuple(operand(substitute(x, {"N": v})) for x in args)
        ok, why = check(case.op, static_args, substitute(r, {"N": v}))
        if not ok:
            return Verdict(case.source, text, "wrong", None, f"at N={v}: {why}", str(r))
    return Verdict(case.source, text, "pass", None, "", str(r))
