"""Float min/max, f16/bf16 pairs and the cluster scope of tylo.atomic_* (tylo issue 15),
traced to NVVM IR without libNVVM or a GPU: the PTX of every new combination, the exact
reduction of f32/f64 min/max to integer atomics (the emitted PTX interpreted on bit
patterns, against IEEE 754 totalOrder), and a typed refusal at the user's line for each
combination PTX lacks, with the refusal's claim checked by tracing its sibling."""

from __future__ import annotations

import inspect
import re
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tylo
from tylo.kernel import atomics

HERE = __file__
FLOATS = {"f32": tylo.f32, "f64": tylo.f64}


def points_at(err: tylo.TraceError, kern, text: str) -> None:
    """The error names this file and the line of ``kern`` whose text is ``text``."""
    lines, first = inspect.getsourcelines(kern.fn)
    want = [first + k for k, line in enumerate(lines) if line.strip() == text]
    assert err.filename == HERE and [err.lineno] == want, str(err)


def statements(llvm: str) -> list[str]:
    """The PTX statements of the kernel's inline asm that mention atom, red or setp."""
    body = llvm.replace("\\0A", "\n").replace("\\09", "\t")
    return [s.strip() for s in re.findall(r"((?:@!?%neg\s+)?(?:atom|red|setp)\.[^;\"]*);", body)]


# ---------------------------------------------------------------------------- float min/max


@tylo.kernel
def float_minmax(out, x, op: tylo.Static, space: tylo.Static, keep: tylo.Static, kw: tylo.Static):
    t = tylo.thread_idx.x
    s = tylo.shared(out.dtype, 64)
    mem = s if space == "shared" else out
    old = getattr(tylo, f"atomic_{op}")(mem, t, x[t], result=keep, **dict(kw))
    if keep:
        x[t + 64] = old
    out[t + 64] = s[t]


@pytest.mark.parametrize("name", ["f32", "f64"])
@pytest.mark.parametrize("op", ["min", "max"])
@pytest.mark.parametrize("space", ["global", "shared"])
@pytest.mark.parametrize("keep", [True, False])
def test_float_minmax_is_one_of_two_predicated_integer_atoms(name, op, space, keep):
    """The PTX: a sign test, then min/max on the unsigned and signed views of the bits
    under complementary predicates; red without a result; every scope for one order."""
    d = FLOATS[name]
    n = d.bits
    neg, pos = ("min", "max") if op == "max" else ("max", "min")
    for scope in atomics.SCOPES:
        order = "release" if scope == "sys" else "relaxed"
        kw = (("scope", scope), ("order", order))
        llvm = float_minmax.trace(d, d, op, space, keep, kw, block=64).llvm
        quals = "" if (scope, order) == ("gpu", "relaxed") else f".{order}.{scope}"
        head = f"{'atom' if keep else 'red'}{quals}.{space}"
        args = "$0, [$1], $2" if keep else "[$0], $1"
        x = "$2" if keep else "$1"
        assert statements(llvm) == [
            f"setp.lt.s{n} %neg, {x}, 0",
            f"@%neg {head}.{neg}.u{n} {args}",
            f"@!%neg {head}.{pos}.s{n} {args}",
        ]


def total_order_key(bits: int, n: int) -> int:
    """IEEE 754 totalOrder as an integer key of an n-bit pattern: -NaN < -inf < ... <
    -0.0 < +0.0 < ... < +inf < +NaN (written from the standard, not from tylo)."""
    sign = 1 << (n - 1)
    return bits if bits < sign else -(bits - sign) - 1


def run_ptx(lines: list[str], memory: int, value: int, n: int) -> tuple[int, int]:
    """Interpret the emitted statements (setp.lt.sN on the value; predicated atom min/max
    with .uN/.sN semantics, PTX ISA 9.7.13.5) on one word: (old, new memory)."""
    mask = (1 << n) - 1

    def signed(x: int) -> int:
        return x - (1 << n) if x >> (n - 1) else x

    setp, *atoms = lines
    assert re.fullmatch(rf"setp\.lt\.s{n} %neg, \$\d, 0", setp), setp
    neg = signed(value) < 0
    chosen = [a for a in atoms if a.startswith("@%neg ") == neg]
    assert len(atoms) == 2 and len(chosen) == 1, atoms
    op, ty = re.search(r"\.(min|max)\.([us])\d+ ", chosen[0]).groups()
    view = signed if ty == "s" else (lambda x: x)
    pick = min if op == "min" else max
    new = pick(memory, value, key=view) & mask
    return memory, new


def float_bits(n: int) -> st.SearchStrategy[int]:
    """Any n-bit pattern, weighted towards zeros, infinities, NaNs and subnormals."""
    if n == 32:
        special = [0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e-45, -1e-45]
        pack = [struct.unpack("<I", struct.pack("<f", f))[0] for f in special]
    else:
        special = [0.0, -0.0, float("inf"), float("-inf"), float("nan"), 5e-324, -5e-324]
        pack = [struct.unpack("<Q", struct.pack("<d", f))[0] for f in special]
    sign = 1 << (n - 1)
    return st.one_of(
        st.integers(0, (1 << n) - 1),
        st.sampled_from(pack + [p ^ sign for p in pack]),
        st.floats(width=n).map(
            lambda f: struct.unpack(
                "<I" if n == 32 else "<Q", struct.pack("<f" if n == 32 else "<d", f)
            )[0]
        ),
    )


@pytest.mark.parametrize("name", ["f32", "f64"])
@pytest.mark.parametrize("op", ["min", "max"])
def test_float_minmax_is_exact_in_total_order(name, op):
    """Defining property, over the whole domain of bit patterns (hypothesis): the emitted
    PTX, run on (memory, value), leaves the totalOrder min/max of the two, and folding any
    sequence of values in any order gives the totalOrder min/max of them all."""
    d = FLOATS[name]
    n = d.bits
    lines = statements(float_minmax.trace(d, d, op, "global", True, (), block=64).llvm)
    pick = max if op == "max" else min

    @settings(max_examples=150, deadline=None)
    @given(m=float_bits(n), v=float_bits(n))
    def one_step(m: int, v: int) -> None:
        old, new = run_ptx(lines, m, v, n)
        assert old == m
        assert new == pick(m, v, key=lambda b: total_order_key(b, n))

    @settings(max_examples=40, deadline=None)
    @given(vs=st.lists(float_bits(n), min_size=1, max_size=12), data=st.data())
    def fold(vs: list[int], data: st.DataObject) -> None:
        order = data.draw(st.permutations(vs))
        memory = order[0]
        for v in order[1:]:
            memory = run_ptx(lines, memory, v, n)[1]
        assert memory == pick(vs, key=lambda b: total_order_key(b, n))

    one_step()
    fold()


def test_total_order_key_agrees_with_float_comparison():
    """The reference itself: for non-NaN values other than a pair of zeros, key order is
    float order; -0.0 sorts just below +0.0 (brute force over a grid of f32 values)."""
    grid = [0.0, -0.0, 1e-45, -1e-45, 1.5, -1.5, 3e38, -3e38, float("inf"), float("-inf")]
    # a list, not a dict: -0.0 and 0.0 are equal keys
    bits = [struct.unpack("<I", struct.pack("<f", f))[0] for f in grid]
    for a, ba in zip(grid, bits):
        for b, bb in zip(grid, bits):
            ka, kb = total_order_key(ba, 32), total_order_key(bb, 32)
            if a == 0.0 and b == 0.0:
                assert (ka < kb) == (str(a) == "-0.0" and str(b) == "0.0")
            else:
                assert (ka < kb) == (a < b)


# ---------------------------------------------------------------------------- pairs


@tylo.kernel
def pair_global(out: tylo.Ptr(align=4), x, op: tylo.Static, keep: tylo.Static, kw: tylo.Static):
    t = tylo.thread_idx.x
    old = getattr(tylo, f"atomic_{op}")(out, 2 * t, (x[t], x[t + 32]), result=keep, **dict(kw))
    if keep:
        x[t + 64] = old[0]
        x[t + 96] = old[1]


@tylo.kernel
def pair_shared(out, x, op: tylo.Static, keep: tylo.Static):
    t = tylo.thread_idx.x
    s = tylo.shared(out.dtype, 128)
    old = getattr(tylo, f"atomic_{op}")(s, 2 * t, (x[t], x[t + 32]), result=keep)
    if keep:
        x[t + 64] = old[0]
        x[t + 96] = old[1]
    tylo.sync_threads()
    out[t] = s[t]


@pytest.mark.parametrize("name", ["f16", "bf16"])
@pytest.mark.parametrize("keep", [True, False])
def test_pair_add_is_one_packed_instruction(name, keep):
    d = {"f16": tylo.f16, "bf16": tylo.bf16}[name]
    kind = "atom" if keep else "red"
    args = "$0, [$1], $2" if keep else "[$0], $1"
    for scope in atomics.SCOPES:
        kw = (("scope", scope),)
        llvm = pair_global.trace(d, d, "add", keep, kw, block=32).llvm
        quals = "" if scope == "gpu" else f".relaxed.{scope}"
        assert statements(llvm) == [f"{kind}{quals}.global.add.noftz.{name}x2 {args}"]
    llvm = pair_shared.trace(d, d, "add", keep, block=32).llvm
    assert statements(llvm) == [f"{kind}.shared.add.noftz.{name}x2 {args}"]
    # the first value is the low half (the lower address): b's bits are shifted by 16
    assert re.search(r"shl i32 %\S+, 16", llvm)


@pytest.mark.parametrize("name", ["f16", "bf16"])
@pytest.mark.parametrize("op", ["min", "max"])
@pytest.mark.parametrize("keep", [True, False])
def test_pair_minmax_is_a_v2_vector_atom_in_global_memory(name, op, keep):
    d = {"f16": tylo.f16, "bf16": tylo.bf16}[name]
    llvm = pair_global.trace(d, d, op, keep, (("order", "release"),), block=32).llvm
    if keep:
        want = f"atom.release.gpu.global.{op}.noftz.v2.{name} {{$0, $1}}, [$2], {{$3, $4}}"
    else:
        want = f"red.release.gpu.global.{op}.noftz.v2.{name} [$0], {{$1, $2}}"
    assert statements(llvm) == [want]


@tylo.kernel
def pair_at(out, k: tylo.Static, n: tylo.Static):
    s = tylo.shared(tylo.f16, n)
    old = tylo.atomic_add(s, k, (1.0, 2.0))
    out[0] = old[0]


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 12), k=st.one_of(st.integers(-3, 14), st.integers(-(2**63), 2**63)))
def test_static_pair_offsets_are_checked_by_brute_force(n, k):
    """A static pair at k of n elements traces iff k is even and 0 <= k <= n - 2; every
    refusal names the line."""
    if k % 2 == 0 and 0 <= k <= n - 2:
        pair_at.trace(tylo.f16, k, n, block=32)
        return
    with pytest.raises(tylo.TraceError) as info:
        pair_at.trace(tylo.f16, k, n, block=32)
    points_at(info.value, pair_at, "old = tylo.atomic_add(s, k, (1.0, 2.0))")


@tylo.kernel
def pair_runtime(out: tylo.Ptr(align=4), j: tylo.Int(multiple_of=2), i):
    tylo.atomic_add(out, j, (1.0, 2.0), result=False)
    tylo.atomic_add(out, 2 * i + j, (1.0, 2.0), result=False)


def test_runtime_pair_offsets_need_a_proof_of_evenness():
    llvm = pair_runtime.trace(tylo.f16, int, int, block=32).llvm
    assert len(statements(llvm)) == 2


# ---------------------------------------------------------------------------- refusals


@tylo.kernel
def refused(out: tylo.Ptr(align=4), how: tylo.Static):
    i = tylo.thread_idx.x
    s = tylo.shared(out.dtype, 64)
    if how == "cluster":
        tylo.atomic_add(out, i, 1, scope="cluster")
    if how == "half-min":
        tylo.atomic_min(out, i, 1.0)
    if how == "half-max-shared":
        tylo.atomic_max(s, i, 1.0)
    if how == "pair-max-shared":
        tylo.atomic_max(s, 2 * i, (1.0, 2.0))
    if how == "pair-max":
        tylo.atomic_max(out, 2 * i, (1.0, 2.0))
    if how == "pair-add":
        tylo.atomic_add(out, 2 * i, (1.0, 2.0))
    if how == "pair-odd":
        tylo.atomic_add(out, 2 * i + 1, (1.0, 2.0))
    if how == "pair-unknown":
        tylo.atomic_add(out, i, (1.0, 2.0))
    if how == "pair-three":
        tylo.atomic_add(out, 2 * i, (1.0, 2.0, 3.0))
    if how == "pair-exch":
        tylo.atomic_exch(out, 2 * i, (1.0, 2.0))
    if how == "pair-cas":
        tylo.atomic_cas(out, 2 * i, (1.0, 2.0), (3.0, 4.0))
    if how == "pair-dtype":
        tylo.atomic_add(out, 2 * i, (tylo.value(1, tylo.f32), 2.0))


@tylo.kernel
def unaligned(out, pair: tylo.Static):
    i = tylo.thread_idx.x
    tylo.atomic_add(out, 2 * i, pair)


# (how, dtype, target, the line, the message, the sibling that traces: (how, dtype, target))
REFUSALS = [
    (
        "cluster",
        tylo.u32,
        "sm_80",
        'tylo.atomic_add(out, i, 1, scope="cluster")',
        r"scope='cluster' needs sm_90\+ \(thread block clusters\), target is sm_80; use "
        r"scope='gpu'",
        ("cluster", tylo.u32, "sm_90a"),
    ),
    (
        "half-min",
        tylo.f16,
        "sm_90a",
        "tylo.atomic_min(out, i, 1.0)",
        r"no atom\.min on f16 elements in global memory .*only as a vector: pass a pair",
        ("pair-max", tylo.f16, "sm_90a"),
    ),
    (
        "half-min",
        tylo.bf16,
        "sm_90a",
        "tylo.atomic_min(out, i, 1.0)",
        r"no atom\.min on bf16 elements",
        ("pair-max", tylo.bf16, "sm_90a"),
    ),
    (
        "half-max-shared",
        tylo.f16,
        "sm_80",
        "tylo.atomic_max(s, i, 1.0)",
        r"no atom\.max on f16 elements in shared memory",
        ("pair-add", tylo.f16, "sm_80"),
    ),
    (
        "pair-max-shared",
        tylo.f16,
        "sm_90a",
        "tylo.atomic_max(s, 2 * i, (1.0, 2.0))",
        r"max on f16 pairs only in global memory \(atom\.global\.max\.noftz\.v2\.f16",
        ("pair-max", tylo.f16, "sm_90a"),
    ),
    (
        "pair-max",
        tylo.f16,
        "sm_80",
        "tylo.atomic_max(out, 2 * i, (1.0, 2.0))",
        r"atom\.global\.max\.noftz\.v2\.f16 needs sm_90\+, target is sm_80",
        ("pair-max", tylo.f16, "sm_90"),
    ),
    (
        "pair-max",
        tylo.bf16,
        "sm_89",
        "tylo.atomic_max(out, 2 * i, (1.0, 2.0))",
        r"v2\.bf16 needs sm_90\+, target is sm_89",
        ("pair-max", tylo.bf16, "sm_90"),
    ),
    (
        "pair-add",
        tylo.bf16,
        "sm_80",
        "tylo.atomic_add(out, 2 * i, (1.0, 2.0))",
        r"atom\.add\.noftz\.bf16x2 needs sm_90\+, target is sm_80; use f16 pairs",
        ("pair-add", tylo.f16, "sm_80"),
    ),
    (
        "pair-add",
        tylo.f32,
        "sm_90a",
        "tylo.atomic_add(out, 2 * i, (1.0, 2.0))",
        r"a pair of values is an f16x2 or bf16x2 operation, but the memory holds f32 elements",
        ("pair-add", tylo.f16, "sm_90a"),
    ),
    (
        "pair-odd",
        tylo.f16,
        "sm_90a",
        "tylo.atomic_add(out, 2 * i + 1, (1.0, 2.0))",
        r"cannot prove that the element offset 2\*\S+ \+ 1 is even",
        ("pair-add", tylo.f16, "sm_90a"),
    ),
    (
        "pair-unknown",
        tylo.f16,
        "sm_90a",
        "tylo.atomic_add(out, i, (1.0, 2.0))",
        r"cannot prove that the element offset \S+ is even; .*multiple_of=2",
        ("pair-add", tylo.f16, "sm_90a"),
    ),
    (
        "pair-three",
        tylo.f16,
        "sm_90a",
        "tylo.atomic_add(out, 2 * i, (1.0, 2.0, 3.0))",
        r"a pair takes exactly 2 values \(one 4-byte f16x2 word\), got 3",
        ("pair-add", tylo.f16, "sm_90a"),
    ),
    (
        "pair-exch",
        tylo.f16,
        "sm_90a",
        "tylo.atomic_exch(out, 2 * i, (1.0, 2.0))",
        r"pairs are for atomic_add, atomic_min and atomic_max",
        ("pair-add", tylo.f16, "sm_90a"),
    ),
    (
        "pair-cas",
        tylo.f16,
        "sm_90a",
        "tylo.atomic_cas(out, 2 * i, (1.0, 2.0), (3.0, 4.0))",
        r"tylo\.atomic_cas: pairs are for",
        ("pair-add", tylo.f16, "sm_90a"),
    ),
    (
        "pair-dtype",
        tylo.f16,
        "sm_90a",
        "tylo.atomic_add(out, 2 * i, (tylo.value(1, tylo.f32), 2.0))",
        r"storing a f32 value into f16 memory",
        ("pair-add", tylo.f16, "sm_90a"),
    ),
]


@pytest.mark.parametrize(("how", "dtype", "target", "line", "message", "sibling"), REFUSALS)
def test_refusals_name_the_line_and_their_sibling_traces(
    how, dtype, target, line, message, sibling
):
    """Each unsupported combination is a TraceError at the user's line; the claim it makes
    (the target, the space, the type, the parity) is checked by tracing the sibling that
    differs only there."""
    with pytest.raises(tylo.TraceError, match=message) as info:
        refused.trace(dtype, how, block=32, target=target)
    points_at(info.value, refused, line)
    s_how, s_dtype, s_target = sibling
    refused.trace(s_dtype, s_how, block=32, target=s_target)


def test_a_pair_needs_a_four_byte_aligned_base():
    with pytest.raises(
        tylo.TraceError,
        match=r"needs a 4-byte aligned base, but only 2-byte "
        r"alignment is known for \w+; annotate the parameter tylo.Ptr\(align=4\)",
    ) as info:
        unaligned.trace(tylo.f16, (1.0, 2.0), block=32)
    points_at(info.value, unaligned, "tylo.atomic_add(out, 2 * i, pair)")
    unaligned.trace(tylo.pointer(tylo.f16, align=4), (1.0, 2.0), block=32)
    unaligned.trace(tylo.f16, 1.0, block=32)  # a single element needs only 2 bytes


@pytest.mark.parametrize("target", ["sm_80", "sm_89"])
def test_every_cluster_scoped_op_is_refused_below_sm_90(target):
    """Brute force over ops, types and spaces: scope='cluster' traces on sm_90a only."""
    for op, d in (("add", tylo.u32), ("add", tylo.f32), ("min", tylo.f32), ("max", tylo.f64)):
        for space in ("global", "shared"):
            kw = (("scope", "cluster"),)
            float_minmax.trace(d, d, op, space, True, kw, block=64, target="sm_90a")
            with pytest.raises(
                tylo.TraceError, match=rf"scope='cluster' needs sm_90\+.*target is {target}"
            ):
                float_minmax.trace(d, d, op, space, True, kw, block=64, target=target)
