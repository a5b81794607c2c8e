"""Float min/max, f16/bf16 pairs and the cluster scope of tylo.atomic_* compiled through
libNVVM and the assembler without a GPU (tylo issue 15): the SASS each becomes on sm_80
and sm_90a, every qualifier combination accepted by the assembler, and the assembler's
own refusal of each form tylo refuses (so that the refusals are PTX's, not tylo's)."""

from __future__ import annotations

import re
from collections import Counter

import pytest

import tylo
from tylo.backend.errors import LinkError
from tylo.backend.link import link_cubin
from tylo.kernel import atomics

TARGETS = ("sm_80", "sm_90a")


def sass_atomics(sass: str) -> list[str]:
    """The SASS opcodes (with modifiers) of the atomic and reduction instructions."""
    return re.findall(r"\b((?:ATOMG|ATOMS|ATOM|REDG|RED)\.[A-Z0-9_.x]+)", sass)


def multiset(ops: list[str]) -> Counter:
    """The opcodes without the memory-model suffix (.STRONG.GPU...)."""
    return Counter(re.sub(r"\.STRONG\.\w+$", "", op) for op in ops)


@tylo.kernel
def float_minmax(f, d, x, y):
    """f32 min and max in every form (global/shared, with/without a result), f64 max in
    global and shared memory: one kernel, so that the SASS is disassembled once."""
    t = tylo.thread_idx.x
    s = tylo.shared(tylo.f32, 64)
    sd = tylo.shared(tylo.f64, 64)
    for op in ("min", "max"):
        for mem in (f, s):
            x[t + 64] = getattr(tylo, f"atomic_{op}")(mem, t, x[t])
            getattr(tylo, f"atomic_{op}")(mem, t, x[t], result=False)
    y[t + 64] = tylo.atomic_max(d, t, y[t])
    y[t + 128] = tylo.atomic_max(sd, t, y[t])
    f[t + 64] = s[t]
    d[t + 64] = sd[t]


@pytest.mark.parametrize("target", TARGETS)
def test_float_minmax_is_two_predicated_integer_atomics(target):
    """f32: global ATOMG (RED/REDG without a result) and shared ATOMS, .MIN/.MAX on the
    unsigned and the signed (.S32) views of the bits, no compare-and-swap loop; f64:
    ATOMG .MAX.S64 / .MIN.64 in global memory, while shared memory has no 64-bit min or
    max, so ptxas turns each of the two into an ATOMS.CAST.SPIN.64 loop."""
    red = "REDG" if target == "sm_90a" else "RED"
    k = float_minmax.compile(tylo.f32, tylo.f64, tylo.f32, tylo.f64, block=64, target=target)
    want = Counter()
    for op, neg in (("MIN", "MAX"), ("MAX", "MIN")):  # min: max.u32 for negative values
        for fam in ("ATOMG.E", f"{red}.E", "ATOMS", "ATOMS"):
            want[f"{fam}.{op}.S32"] += 1
            want[f"{fam}.{neg}"] += 1
    want["ATOMG.E.MAX.S64"] += 1
    want["ATOMG.E.MIN.64"] += 1
    want["ATOMS.CAST.SPIN.64"] += 2
    assert multiset(sass_atomics(k.sass)) == want
    assert "ATOMG.E.CAS" not in k.sass


@tylo.kernel
def pairs(h: tylo.Ptr(align=4), b: tylo.Ptr(align=4), x, hopper: tylo.Static):
    """Every pair form of one target in one kernel, and a single f16 add for contrast."""
    t = tylo.thread_idx.x
    s = tylo.shared(tylo.f16, 128)
    v = (x[t], x[t + 64])
    x[t + 128] = tylo.atomic_add(h, 2 * t, v)[0]
    tylo.atomic_add(h, 2 * t + 128, v, result=False)
    x[t + 192] = tylo.atomic_add(s, 2 * t, v)[1]
    x[t + 256] = tylo.atomic_add(h, t + 256, x[t])
    if hopper:
        w = (x[t].to(tylo.bf16), x[t + 64].to(tylo.bf16))
        h[t + 384] = tylo.atomic_add(b, 2 * t, w)[0].to(tylo.f16)
        tylo.atomic_add(b, 2 * t + 128, w, result=False)
        for op in ("min", "max"):
            x[t + 448] = getattr(tylo, f"atomic_{op}")(h, 2 * t + 512, v)[0]
            getattr(tylo, f"atomic_{op}")(h, 2 * t + 640, v, result=False)
            h[t + 768] = getattr(tylo, f"atomic_{op}")(b, 2 * t + 512, w)[1].to(tylo.f16)
            getattr(tylo, f"atomic_{op}")(b, 2 * t + 640, w, result=False)
    h[t + 896] = s[t]


@pytest.mark.parametrize("target", TARGETS)
def test_pairs_are_native_in_global_memory_and_a_cas_loop_in_shared(target):
    """Global: ATOMG/RED(G) .ADD.F16x2.RN (.BF16x2 on sm_90a) and, on sm_90a, .MIN/.MAX
    .F16x2/.BF16x2, one instruction each. Shared: ATOMS has no packed half add, so
    ptxas builds an ATOMS.CAST.SPIN loop. A single f16 add is a compare-and-swap loop in
    global memory too (ATOMG.E.CAS), which is why the pair form is worth having."""
    hopper = target == "sm_90a"
    red = "REDG" if hopper else "RED"
    k = pairs.compile(tylo.f16, tylo.bf16, tylo.f16, hopper, block=64, target=target)
    want = Counter(
        {
            "ATOMG.E.ADD.F16x2.RN": 1,
            f"{red}.E.ADD.F16x2.RN": 1,
            "ATOMS.CAST.SPIN": 1,
            "ATOMG.E.CAS": 1,
        }
    )
    if hopper:
        want.update({"ATOMG.E.ADD.BF16x2.RN": 1, "REDG.E.ADD.BF16x2.RN": 1})
        for op in ("MIN", "MAX"):
            for ty in ("F16x2", "BF16x2"):
                want.update({f"ATOMG.E.{op}.{ty}.RN": 1, f"REDG.E.{op}.{ty}.RN": 1})
    assert multiset(sass_atomics(k.sass)) == want


@tylo.kernel
def every_new_combination(g: tylo.Ptr(align=4), x, pairs: tylo.Static):
    """Every (op, space, scope, order, result) of f32/f64 min/max, or of the pairs."""
    s = tylo.shared(g.dtype, 128)
    t = tylo.thread_idx.x
    for space, mem in (("global", g), ("shared", s)):
        for scope in atomics.SCOPES:
            for order in atomics.ORDERS:
                kw = {"scope": scope, "order": order}
                keeps = (True, False) if order in ("relaxed", "release") else (True,)
                for op in ("add", "min", "max") if pairs else ("min", "max"):
                    if pairs and op != "add" and space == "shared":
                        continue
                    for keep in keeps:
                        v = (x[t], x[t + 64]) if pairs else x[t]
                        old = getattr(tylo, f"atomic_{op}")(mem, 2 * t, v, result=keep, **kw)
                        if keep:
                            x[t + 128] = old[0] if pairs else old


@pytest.mark.parametrize(
    ("d", "pairs"), [(tylo.f32, False), (tylo.f64, False), (tylo.f16, True), (tylo.bf16, True)]
)
def test_the_assembler_accepts_every_new_combination(d, pairs):
    """ptxas (not only the tracer) accepts each qualifier combination the API allows,
    the cluster scope included, on sm_90a."""
    k = every_new_combination.compile(tylo.pointer(d, align=4), d, pairs, block=64, target="sm_90a")
    body = k.ptx
    n = len(atomics.SCOPES)
    if pairs:  # add: 2 spaces, min/max: global; 4 orders with a result, 2 without
        assert len(re.findall(r"\batom\.\S+x2\b|\batom\.\S+\.v2\.", body)) == n * 4 * 4
        assert len(re.findall(r"\bred\.\S+x2\b|\bred\.\S+\.v2\.", body)) == n * 2 * 4
    else:  # each call is two predicated instructions
        assert len(re.findall(r"@!?%neg atom\.", body)) == 2 * 2 * n * 4 * 2
        assert len(re.findall(r"@!?%neg red\.", body)) == 2 * 2 * n * 2 * 2
    assert ".cluster." in body


# ------------------------------------------------ the refused forms, as the assembler sees them

PTX = """.version 8.5
.target {target}
.address_size 64
.visible .entry probe(.param .u64 p)
{{
.reg .b64 %rd<3>; .reg .b32 %r<4>; .reg .b16 %h<4>; .reg .f32 %f<3>;
ld.param.u64 %rd1, [p];
cvt.u32.u64 %r3, %rd1;
mov.b16 %h1, 0; mov.b32 %r1, 0; mov.f32 %f1, 0f00000000;
{statement};
st.global.b16 [%rd1], %h2; st.global.b32 [%rd1], %r2; st.global.f32 [%rd1], %f2;
ret;
}}
"""

# (statement, the targets on which PTX has it): each refusal of tylo.kernel.atomics, and
# the supported sibling it names
FORMS = [
    ("atom.global.min.f32 %f2, [%rd1], %f1", ()),  # hence the integer reduction
    ("atom.global.max.f32 %f2, [%rd1], %f1", ()),
    ("atom.global.min.noftz.f16 %h2, [%rd1], %h1", ()),  # a single f16: no min/max
    ("atom.global.max.noftz.bf16 %h2, [%rd1], %h1", ()),
    ("atom.shared.max.noftz.f16 %h2, [%r3], %h1", ()),
    ("atom.global.max.noftz.v2.f16 {%h2, %h3}, [%rd1], {%h1, %h1}", ("sm_90a",)),
    ("atom.global.min.noftz.v2.bf16 {%h2, %h3}, [%rd1], {%h1, %h1}", ("sm_90a",)),
    ("atom.shared.max.noftz.v2.f16 {%h2, %h3}, [%r3], {%h1, %h1}", ()),  # vectors: global
    ("atom.global.add.noftz.f16x2 %r2, [%rd1], %r1", ("sm_80", "sm_90a")),
    ("atom.shared.add.noftz.f16x2 %r2, [%r3], %r1", ("sm_80", "sm_90a")),
    ("atom.global.add.noftz.bf16x2 %r2, [%rd1], %r1", ("sm_90a",)),
    ("atom.shared.add.noftz.bf16x2 %r2, [%r3], %r1", ("sm_90a",)),
    ("atom.relaxed.cluster.global.add.u32 %r2, [%rd1], %r1", ("sm_90a",)),
    ("red.release.cluster.shared.add.u32 [%r3], %r1", ("sm_90a",)),
    ("atom.global.max.s32 %r2, [%rd1], %r1", ("sm_80", "sm_90a")),  # the reduction's parts
    ("atom.global.min.u32 %r2, [%rd1], %r1", ("sm_80", "sm_90a")),
]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize(("statement", "targets"), FORMS)
def test_the_assembler_agrees_with_each_refusal(statement, targets, target):
    text = PTX.format(target=target, statement=statement)
    if target in targets:
        link_cubin(text, target, linker="ptxas" if _has_ptxas() else "auto")
    else:
        with pytest.raises(LinkError):
            link_cubin(text, target, linker="ptxas" if _has_ptxas() else "auto")


def _has_ptxas() -> bool:
    from tylo.backend.link import find_ptxas

    return find_ptxas() is not None
