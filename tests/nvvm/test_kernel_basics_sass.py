"""The kernel language's basics compiled through libNVVM and ptxas without a GPU (tylo
issue 15, item 4): atomics become ATOMG / REDG / ATOMS, tylo.print_ calls vprintf, local
arrays indexed statically stay in registers (no LDL/STL), and the bounds-debug mode
compiles to a vprintf call and a trap."""

from __future__ import annotations

import re

import pytest

import tylo
from tylo.kernel import atomics, debug

TARGETS = ("sm_80", "sm_90a")


def family(sass: str, name: str) -> int:
    return len(re.findall(rf"\b{name}(?:\.[A-Z0-9_.]+)?\b", sass))


@tylo.kernel
def histogram(bins, x, n, keep: tylo.Static, space: tylo.Static):
    t = tylo.thread_idx.x
    i = tylo.block_idx.x * tylo.block_dim.x + t
    if space == "shared":
        s = tylo.shared(tylo.u32, 16)
        if t < 16:
            s[t] = 0
        tylo.sync_threads()
        if i < n:
            tylo.atomic_add(s, x[i] % 16, x[i], scope="cta")
        tylo.sync_threads()
        if t < 16:
            tylo.atomic_add(bins, t, s[t], result=False)
    elif i < n:
        old = tylo.atomic_add(bins, x[i] % 16, 1, result=keep)
        if keep:
            x[i] = old


@pytest.mark.parametrize("target", TARGETS)
def test_global_atomics_are_atomg_or_redg(target):
    red = histogram.compile(tylo.u32, tylo.u32, int, False, "global", block=128, target=target)
    atom = histogram.compile(tylo.u32, tylo.u32, int, True, "global", block=128, target=target)
    assert (
        "red.global.add.u32" in red.ptx and family(red.sass, "REDG") + family(red.sass, "RED") == 1
    )
    assert family(red.sass, "ATOMG") == 0
    assert "atom.global.add.u32" in atom.ptx and family(atom.sass, "ATOMG") == 1


@pytest.mark.parametrize("target", TARGETS)
def test_shared_atomics_are_atoms(target):
    k = histogram.compile(tylo.u32, tylo.u32, int, False, "shared", block=128, target=target)
    assert "atom.relaxed.cta.shared.add.u32" in k.ptx
    assert family(k.sass, "ATOMS") == 1
    assert family(k.sass, "REDG") + family(k.sass, "RED") == 1


@tylo.kernel
def every_atomic(out, f, d, k: tylo.Static):
    t = tylo.thread_idx.x
    a = tylo.atomic_min(out, t, tylo.value(t, tylo.i64), order="acquire", scope="sys")
    b = tylo.atomic_max(out, t + 64, a, order="release")
    c = tylo.atomic_exch(out, t + 128, b, order="acq_rel", scope="cta")
    e = tylo.atomic_cas(out, t + 192, c, tylo.value(t, tylo.i64))
    fa = tylo.atomic_add(f, t, 1.5)
    da = tylo.atomic_add(d, t, 2.5)
    out[t] = e
    f[t + 64] = fa
    d[t + 64] = da


def test_every_op_compiles_with_its_qualifiers():
    k = every_atomic.compile(tylo.i64, tylo.f32, tylo.f64, 0, block=64, target="sm_90a")
    for text in (
        "atom.acquire.sys.global.min.s64",
        "atom.release.gpu.global.max.s64",
        "atom.acq_rel.cta.global.exch.b64",
        "atom.global.cas.b64",
        "atom.global.add.f32",
        "atom.global.add.f64",
    ):
        assert text in k.ptx, text
    assert family(k.sass, "ATOMG") == 6 or family(k.sass, "ATOMG") + family(k.sass, "ATOM") == 6


@tylo.kernel
def say(x):
    t = tylo.thread_idx.x
    tylo.print_("thread %d sees %f\n", t, x[t])


@pytest.mark.parametrize("target", TARGETS)
def test_print_calls_vprintf(target):
    k = say.compile(tylo.f32, block=32, target=target)
    assert ".extern .func  (.param .b32 func_retval0) vprintf" in k.ptx
    assert re.search(r"call\.uni \(retval0\),\s*vprintf", k.ptx)
    assert "st.local.f64" in k.ptx and "cvt.f64.f32" in k.ptx
    assert "CALL" in k.sass


@tylo.kernel
def stencil(out, x, runtime_index: tylo.Static, j):
    t = tylo.thread_idx.x
    a = tylo.local(tylo.f32, 8)
    for k in range(8):
        a[k] = x[t * 8 + k]
    for r in tylo.range(4):
        for k in range(8):
            a[k] = a[k] * 0.5 + a[(k + 1) % 8]
    if runtime_index:
        for r in tylo.range(j):
            a[(r * 3) % 8] = a[(r * 5) % 8] + 1.0
    s = 0.0
    for k in range(8):
        s = s + a[k]
    out[t] = s


@pytest.mark.parametrize("target", TARGETS)
def test_static_local_arrays_stay_in_registers(target):
    k = stencil.compile(tylo.f32, tylo.f32, False, int, block=32, target=target)
    assert "LDL" not in k.sass and "STL" not in k.sass
    assert ".local" not in k.ptx and not k.resources.spill_stores


def test_runtime_indices_use_local_memory():
    """The contrast that makes the register test meaningful: a runtime index keeps the
    array in memory (the alloca survives SROA)."""
    k = stencil.compile(tylo.f32, tylo.f32, True, int, block=32, target="sm_90a")
    assert "__local_depot" in k.ptx and ("STL" in k.sass or "LDL" in k.sass)


@tylo.kernel
def debug_read(out, x, j):
    s = tylo.shared(tylo.f32, 64)
    t = tylo.thread_idx.x
    s[t] = x[t]
    tylo.sync_threads()
    out[t] = s[t + j]


def test_debug_bounds_compiles_to_vprintf_and_trap(monkeypatch):
    monkeypatch.delenv(debug.ENV, raising=False)
    plain = debug_read.compile(tylo.f32, tylo.f32, int, block=64, target="sm_90a")
    monkeypatch.setenv(debug.ENV, "1")
    checked = debug_read.compile(tylo.f32, tylo.f32, int, block=64, target="sm_90a")
    assert checked is not plain  # the mode is part of the specialization key
    assert "trap;" in checked.ptx and "vprintf" in checked.ptx
    assert "trap;" not in plain.ptx and "vprintf" not in plain.ptx
    assert "BPT.TRAP" in checked.sass


@tylo.kernel
def all_combinations(g, x, keep: tylo.Static):
    """Every supported (op, space, scope, order) on the element type of ``g``."""
    s = tylo.shared(g.dtype, 64)
    t = tylo.thread_idx.x
    v = x[t]
    for space, mem in (("global", g), ("shared", s)):
        for scope in atomics.SCOPES:
            for order in atomics.ORDERS:
                kw = {"scope": scope, "order": order}
                for op in ("add", "min", "max", "exch", "cas"):
                    if atomics._ptx_suffix(op, g.dtype) is None:
                        continue
                    args = (v, v) if op == "cas" else (v,)
                    old = getattr(tylo, f"atomic_{op}")(mem, t, *args, **kw)
                    if keep:
                        x[t + 64] = old
                    elif op in ("add", "min", "max") and order in ("relaxed", "release"):
                        getattr(tylo, f"atomic_{op}")(mem, t, v, result=False, **kw)


@pytest.mark.parametrize(
    "d", [tylo.u32, tylo.i32, tylo.u64, tylo.i64, tylo.f32, tylo.f64, tylo.f16, tylo.bf16]
)
def test_ptxas_accepts_every_combination(d):
    """ptxas (not only the tracer) accepts each qualifier combination the API allows."""
    k = all_combinations.compile(d, d, False, block=64, target="sm_90a")
    n_atom = k.ptx.count("\tatom.") + k.ptx.count(" atom.")
    n_red = k.ptx.count("\tred.") + k.ptx.count(" red.")
    ops = sum(atomics._ptx_suffix(op, d) is not None for op in ("add", "min", "max", "exch", "cas"))
    reds = sum(atomics._ptx_suffix(op, d) is not None for op in ("add", "min", "max"))
    scopes = len(atomics.SCOPES)
    assert n_atom == 2 * scopes * 4 * ops
    assert n_red == 2 * scopes * 2 * reds
    assert family(k.sass, "ATOMS") >= 1 and family(k.sass, "ATOMG") >= 1
