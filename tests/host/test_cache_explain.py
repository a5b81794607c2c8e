"""Why a kernel misses the first cache level, and the warp GEMM reaching it: llvmlite IR
types (the GEMM epilogue's module globals ``I32``/``F32``) have a stable text, so a trace
that reads them is stored; a fresh process then finds the GEMM without tracing. A
specialization that cannot be stored says why: ``not_stored()``, the ``tylo.cache``
debug log, and with ``TYLO_CACHE_EXPLAIN=1`` a :class:`NotStoredWarning` naming the value
and where it was read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from llvmlite import ir

import tylo
from tylo.kernel import diskcache
from tylo.kernel.reads import Dependencies, stable_text

ROOT = Path(tylo.__file__).parents[1]

# ------------------------------------------------------------- llvmlite types


def _named(name: str, body: list[ir.Type] | None, packed: bool) -> ir.Type:
    t = ir.IdentifiedStructType(ir.Context(), name, packed)
    if body is not None:
        t.set_body(*body)
    return t


scalar = st.one_of(
    st.integers(1, 128).map(ir.IntType),
    st.sampled_from([ir.FloatType(), ir.DoubleType(), ir.HalfType()]),
)
llvm_types = st.recursive(
    scalar,
    lambda c: st.one_of(
        st.tuples(c, st.integers(0, 5)).map(lambda p: p[0].as_pointer(p[1])),
        st.tuples(c, st.integers(0, 9)).map(lambda p: ir.ArrayType(*p)),
        st.tuples(scalar, st.integers(1, 8)).map(lambda p: ir.VectorType(*p)),
        st.lists(c, max_size=3).map(ir.LiteralStructType),
        st.tuples(
            st.sampled_from(["s", "t"]), st.none() | st.lists(c, max_size=2), st.booleans()
        ).map(lambda p: _named(*p)),
    ),
    max_leaves=6,
)


def _same(a: ir.Type, b: ir.Type) -> bool:
    """Brute force, structurally: the same class and IR text, and the same parts all the
    way down (pointee, element, elements, a named struct's body and packing)."""
    if type(a) is not type(b) or str(a) != str(b):
        return False
    if getattr(a, "packed", None) != getattr(b, "packed", None):
        return False
    for name in ("pointee", "element"):
        if hasattr(a, name) and not _same(getattr(a, name), getattr(b, name)):
            return False
    ea, eb = getattr(a, "elements", None), getattr(b, "elements", None)
    if (ea is None) != (eb is None):
        return False
    return ea is None or (len(ea) == len(eb) and all(_same(x, y) for x, y in zip(ea, eb)))


@settings(max_examples=200, deadline=None)
@given(llvm_types, llvm_types)
def test_llvmlite_types_have_a_text_equal_exactly_for_equal_types(a, b):
    assert (stable_text(a) == stable_text(b)) == _same(a, b)


def test_the_epilogue_globals_text_is_the_same_in_another_process():
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); from llvmlite import ir; "
        "from tylo.kernel.reads import stable_text; "
        "print(stable_text((ir.IntType(32), ir.FloatType(), ir.IntType(8).as_pointer(3))))"
    )
    outs = {
        subprocess.run(
            [sys.executable, "-c", script, str(ROOT)],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout.strip()
        for seed in ("1", "2")
    }
    assert outs == {stable_text((ir.IntType(32), ir.FloatType(), ir.IntType(8).as_pointer(3)))}


USER = """
from llvmlite import ir
import tylo

I32 = ir.IntType(32)
THING = {thing}


def helper():
    return I32.width + (0 if THING is None else 1)


@tylo.kernel
def k(out, n):
    i = tylo.thread_idx.x
    if i < n:
        out[i] = float(helper())
"""


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    def make(name: str, thing: str = "None"):
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(USER.format(thing=thing)))
        monkeypatch.syspath_prepend(str(tmp_path))
        return __import__(name)

    yield make
    for name in [n for n in sys.modules if n.startswith("ce_")]:
        del sys.modules[name]


def test_a_changed_llvmlite_global_fails_the_check(user_module):
    mod = user_module("ce_types")
    deps = Dependencies()
    deps.add_code(mod.helper.__code__, mod.helper.__globals__)
    record = json.loads(json.dumps(deps.to_json()))
    assert "unverifiable" not in record and Dependencies.still_valid(record)
    mod.I32 = ir.IntType(64)
    assert not Dependencies.still_valid(record)
    mod.I32 = ir.IntType(32)  # another object, the same type
    assert Dependencies.still_valid(record)


# ------------------------------------------------------------- explaining a miss


@pytest.mark.parametrize("value", ["", "0", "false", "no", "1", "yes", "TRUE"])
def test_a_global_without_stable_text_is_explained(user_module, monkeypatch, value):
    monkeypatch.setenv("TYLO_CACHE_EXPLAIN", value)
    mod = user_module(f"ce_global_{abs(hash(value))}", "object()")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        mod.k.compile(tylo.f32, int, block=32, target="sm_90a")
    reason = diskcache.not_stored()["k"]
    assert "THING (builtins.object) has no stable text" in reason
    assert f"read by helper ({mod.__file__}:" in reason
    ours = [w for w in caught if issubclass(w.category, diskcache.NotStoredWarning)]
    on = value.lower() in ("1", "yes", "true")
    assert len(ours) == (1 if on else 0)
    if on:
        assert "THING" in str(ours[0].message) and "helper" in str(ours[0].message)


def test_a_closure_variable_without_stable_text_is_explained(monkeypatch, tmp_path):
    monkeypatch.setenv("TYLO_CACHE_EXPLAIN", "1")
    src = textwrap.dedent(
        """
        import tylo

        def make(thing):
            @tylo.kernel
            def k_closure(out, n):
                if thing is None:
                    out[0] = 1.0
            return k_closure
        """
    )
    (tmp_path / "ce_closure.py").write_text(src)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        import ce_closure

        kern = ce_closure.make(object())
        bindings = kern._spec_bindings((tylo.f32, int), {})
        with pytest.warns(diskcache.NotStoredWarning, match="closure variable 'thing'"):
            key = diskcache.specialization_key(kern, bindings, (32, 1, 1), "sm_90a")
        assert key is None
        assert "ce_closure.py" in diskcache.not_stored()["k_closure"]
    finally:
        sys.modules.pop("ce_closure", None)


# ------------------------------------------------------------- two processes

SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[2])
import tylo
from tylo.kernel import diskcache
from tylo.ops.gemm import host as shipped
import ce_gemm.host as copy

out = {}
for name, host in (("shipped", shipped), ("user copy", copy)):
    cfg = host.choose_config(4096, 4096, 4096, 4096, 4096, ldd=4096, dtype=tylo.bf16)
    k = host.compile_gemm(cfg, "sm_90a")
    kern = host.tiled_gemm_kernel
    out[name] = [k.timings["cache"], kern.stats.traces, kern.stats.disk_hits]
out["not stored"] = diskcache.not_stored()
print(json.dumps(out))
"""


def test_the_warp_gemm_is_a_first_level_hit_in_a_fresh_process(tmp_path):
    """The shipped GEMM and a user's copy of it (whose epilogue's llvmlite globals are
    then user globals the trace reads): the second process traces neither."""
    pkg = tmp_path / "ce_gemm"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    for f in ("kernel", "epilogue", "sass", "pack", "host"):
        text = (ROOT / "tylo" / "ops" / "gemm" / f"{f}.py").read_text()
        (pkg / f"{f}.py").write_text(text.replace("tylo.ops.gemm.", "ce_gemm."))
    env = {**os.environ, "TYLO_CACHE_DIR": str(tmp_path / "cache"), "TYLO_CACHE_EXPLAIN": "1"}
    runs = []
    for _ in range(2):
        proc = subprocess.run(
            [sys.executable, "-c", SCRIPT, str(ROOT), str(tmp_path)],
            check=False,
            capture_output=True,
            text=True,
            env=env,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr
        assert "NotStoredWarning" not in proc.stderr, proc.stderr
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    first, second = runs
    assert first["shipped"][1] == 1 and first["user copy"][1] == 1  # traced once each
    assert second["shipped"] == ["kernel-hit", 0, 1]
    assert second["user copy"] == ["kernel-hit", 0, 1]
    assert first["not stored"] == second["not stored"] == {}
