"""tylo.tile.fragment_io inside kernels, compiled for sm_80 and sm_90a without a GPU: vector
loads and stores by ownership (16-byte accesses), bounds checked only where the facts do
not settle them, clamped axes, keep masks, pieces of at most 16 bytes, tiles as sources,
and typed errors for ownerships, layouts and bounds that vectors cannot use."""

from __future__ import annotations

import math
import re

import pytest

import tylo
from tylo.layouts import Layout
from tylo.tile.access import GlobalTile, SharedTile
from tylo.tile.fragment_io import coordinates, load_fragment, store_fragment
from tylo.tile.ownership import Ownership

Dim = tylo.Int(min=1, max=2**31 - 1)
# 8 rows of 128 columns, 32 lanes per row striding 4-element vectors, 4 vectors per lane
STRIPED = Ownership.from_modes((8, 512), [(32, 1, 4), (8, 0, 1)], [(4, 1, 1), (4, 1, 128)])


def _count(sass: str, opcode: str) -> int:
    return len(re.findall(rf"\b{re.escape(opcode)}\b", sass))


def _family(sass: str, name: str) -> int:
    return len(re.findall(rf"\b{name}(?:\.[A-Z0-9_.]+)?\b", sass))


# --8<-- [start:window]
@tylo.kernel
def window(out, x, rows: Dim, cols: Dim, own: tylo.Static, vec: tylo.Static, mode: tylo.Static):
    """Block b doubles its window of ``x`` (rows from ``8 * b``) into ``out`` by ``own``,
    ``vec`` elements per access; ``mode`` picks what the facts say and what is clamped."""
    x = tylo.assume_aligned(x, 4 * vec)
    out = tylo.assume_aligned(out, 4 * vec)
    tylo.assume(tylo.divisible(cols, vec))
    if "full" in mode:  # the facts settle the column checks
        tylo.assume(cols >= own.shape[1])
    X = tylo.view(x, Layout((rows, cols), (cols, 1)))
    Out = tylo.view(out, Layout((rows, cols), (cols, 1)))
    tid = tylo.thread_idx.x
    at = (tylo.block_idx.x * own.shape[0], 0)
    edge = {"origin": at, "bounds": (rows, cols), "vector": vec}
    clamp = (0,) if "clamp" in mode else ()
    f = load_fragment(X, own, tid, clamp=clamp, fill=-1.0, **edge)
    if "show" in mode:  # every value stored (out has room for the whole grid's tiles)
        store_fragment(Out, f * 2.0, tid, origin=at, vector=vec)
    else:
        store_fragment(Out, f * 2.0, tid, **edge)


# --8<-- [end:window]


def _compile(vec=4, mode=("fill",), target="sm_90a", own=STRIPED):
    return window.compile(
        tylo.f32, tylo.f32, int, int, own, vec, mode, block=own.threads, target=target
    )


@pytest.mark.parametrize("target", ["sm_80", "sm_90a"])
def test_vectors_of_16_bytes(target):
    k = _compile(target=target)
    sass = k.sass
    assert _count(sass, "LDG.E.128") == 4 and _count(sass, "STG.E.128") == 4
    assert _family(sass, "LDG") == 4 and _family(sass, "STG") == 4
    assert "LDL" not in sass and "STL" not in sass


def test_facts_settle_the_column_checks():
    """Elements past the rows or the columns read fill: a select per element, unless the
    facts settle both checks (``cols >= 512`` stated, rows clamped): then none at all."""
    fill = _compile(mode=("fill",))
    full = _compile(mode=("full", "clamp"))
    assert fill.ptx.count("selp.f32") > 0 and _count(fill.sass, "FSEL") > 0
    assert full.ptx.count("selp.f32") == 0 and _count(full.sass, "FSEL") == 0
    assert _family(full.sass, "ISETP") < _family(fill.sass, "ISETP")
    assert _count(full.sass, "LDG.E.128") == 4


def test_clamped_rows_need_no_select():
    """With the columns proved inside, the rows alone decide: filled rows need a select
    per element, clamped rows (the last row read again) a minimum per row instead."""
    rows_fill = _compile(mode=("full", "show"))
    rows_clamp = _compile(mode=("full", "clamp", "show"))
    assert rows_fill.ptx.count("selp.f32") == 16 and rows_clamp.ptx.count("selp.f32") == 0
    assert rows_clamp.ptx.count("min.") >= 1


def test_narrow_vectors_and_pieces():
    """vec 2 (8 bytes) and vec 1 move the same elements in more instructions; 8 f32 per
    group move as two 16-byte pieces."""
    assert _count(_compile(vec=2, own=_striped(2)).sass, "LDG.E.64") == 8
    assert _family(_compile(vec=1, own=_striped(1)).sass, "LDG") == 16
    wide = _compile(vec=8, own=_striped(8)).sass
    assert _count(wide, "LDG.E.128") == 4 and _count(wide, "STG.E.128") == 4


def _striped(vec: int) -> Ownership:
    per = 16 // vec
    return Ownership.from_modes(
        (8, 128 * 4), [(32, 1, vec), (8, 0, 1)], [(vec, 1, 1), (per, 1, 32 * vec)]
    )


# --8<-- [start:masked]
@tylo.kernel
def masked(out, x, mask, n: Dim, own: tylo.Static):
    """Masked loads (a bool fragment read by the same ownership), coordinates compared
    with a runtime bound, a shared staging tile read back by the ownership."""
    tid = tylo.thread_idx.x
    shape = own.shape
    x = tylo.assume_aligned(x, 16)
    out = tylo.assume_aligned(out, 16)
    mask = tylo.assume_aligned(mask, 4)
    X = tylo.view(x, Layout(shape, (shape[1], 1)))
    M = tylo.view(mask, Layout(shape, (shape[1], 1)))
    keep = load_fragment(M, own, tid, vector=4, fill=False)
    keep = keep & (coordinates(own, tid, 1) < n)
    f = load_fragment(X, own, tid, vector=4, fill=-math.inf, keep=keep)
    smem = tylo.shared(tylo.f32, shape[0] * shape[1])
    S = SharedTile(smem, Layout(shape, (shape[1], 1)))
    store_fragment(S, f, tid, vector=4)
    tylo.sync_threads()
    g = load_fragment(S, own, tid, vector=4)
    store_fragment(GlobalTile(out, Layout(shape, (shape[1], 1))), g, tid, vector=4)


# --8<-- [end:masked]


def test_keep_masks_tiles_and_shared_vectors():
    k = masked.compile(tylo.f32, tylo.f32, tylo.bool_, int, STRIPED, block=256, target="sm_90a")
    sass = k.sass
    assert _count(sass, "LDG.E.128") == 4  # the values
    assert _family(sass, "LDG") == 8  # and 4 bytes of the mask per vector
    assert _count(sass, "FSEL") == 16  # one select per element: mask and bound together
    assert _count(sass, "STS.128") == 4 and _count(sass, "LDS.128") == 4
    assert _count(sass, "STG.E.128") == 4


@tylo.kernel
def bad(out, x, n: Dim, kind: tylo.Static):
    tid = tylo.thread_idx.x
    own = STRIPED
    x = tylo.assume_aligned(x, 16)
    rows, cols = own.shape
    X = tylo.view(x, Layout((rows, cols), (cols, 1)))
    if kind == "vector":  # 3 does not divide 16 slots
        load_fragment(X, own, tid, vector=3)
    elif kind == "runs":  # slots 0..7 are two runs of 4, 128 apart
        load_fragment(X, own, tid, vector=8)
    elif kind == "stride":  # column-major: consecutive columns are not adjacent
        load_fragment(tylo.view(x, Layout((rows, cols), (1, rows))), own, tid, vector=4)
    elif kind == "bound":  # nothing says the row length is a multiple of 4
        load_fragment(X, own, tid, origin=(0, 0), bounds=(rows, n), vector=4)
    elif kind == "clamp":
        load_fragment(X, own, tid, origin=(0, 0), bounds=(rows, cols), clamp=(1,), vector=4)
    elif kind == "rank":
        load_fragment(x, own, tid)
    elif kind == "keep":
        load_fragment(X, own, tid, keep=True)
    elif kind == "store":
        store_fragment(X, [1.0], tid)


@pytest.mark.parametrize(
    "kind,match",
    [
        ("vector", "vector must be a positive int dividing the 16 slots"),
        ("runs", "are not 8 consecutive elements along one axis"),
        ("stride", "element stride there is 8; vector accesses need stride 1"),
        ("bound", "is not provably a multiple of 4"),
        ("clamp", "axis 1 carries the vectors; it cannot be clamped"),
        ("rank", "a 2-D ownership and"),
        ("keep", "keep must be a bool Fragment"),
        ("store", "expected a Fragment, got list"),
    ],
)
def test_typed_errors(kind, match):
    with pytest.raises(tylo.TraceError, match=match):
        bad.compile(tylo.f32, tylo.f32, int, kind, block=256, target="sm_90a")
