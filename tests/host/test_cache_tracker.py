"""Which user code ran during a trace (:mod:`tylo.kernel.tracker`): every mode records
the same dependencies as the plain Python profile hook (the reference), on real kernels
and on generated call graphs, and compiling under ``cProfile`` or another profile hook
works and leaves that profiler in place, still seeing the trace."""

from __future__ import annotations

import cProfile
import functools
import json
import pstats
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tylo
from tylo.kernel import trace as trace_mod
from tylo.kernel import tracker as tracker_mod
from tylo.kernel.reads import Dependencies
from tylo.kernel.trace import trace_kernel
from tylo.kernel.tracker import DependencyTracker
from tylo.target import Target

ROOT = Path(tylo.__file__).parents[1]
FAST = "monitoring" if hasattr(sys, "monitoring") else "lsprof"


def _user_copy(tmp_path: Path) -> None:
    """The warp GEMM and softmax as user packages (tylo's own files are not recorded)."""
    for pkg, orig, files in (
        ("tk_gemm", "gemm", ["kernel", "epilogue", "sass", "pack", "host"]),
        ("tk_softmax", "softmax", ["kernel", "plan", "host"]),
    ):
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
        for f in files:
            text = (ROOT / "tylo" / "ops" / orig / f"{f}.py").read_text()
            (tmp_path / pkg / f"{f}.py").write_text(text.replace(f"tylo.ops.{orig}.", f"{pkg}."))
    (tmp_path / "tk_vadd.py").write_text(
        (ROOT / "examples" / "vector_add" / "kernel.py").read_text()
    )


@pytest.fixture(scope="module")
def user_kernels(tmp_path_factory: pytest.TempPathFactory):
    tmp_path = tmp_path_factory.mktemp("user")
    _user_copy(tmp_path)
    sys.path.insert(0, str(tmp_path))
    import tk_gemm.host as gh
    import tk_softmax.host as sh
    import tk_softmax.plan as sp
    import tk_vadd

    cfg = gh.choose_config(4096, 4096, 4096, 4096, 4096, ldd=4096, dtype=tylo.bf16)
    a = tylo.pointer(cfg.dtype, align=16)
    d = tylo.pointer(tylo.f32, align=16) if cfg.epilogue == "staged" else tylo.f32
    scfg = sp.choose_config(4096, 4096, vec=4)
    f32 = tylo.pointer(tylo.f32)
    yield {
        "gemm": (gh.tiled_gemm_kernel, (cfg, d, a, a, *[int] * 6, float, False), cfg.plan.threads),
        "softmax": (sh.kernel_for(scfg), (scfg, f32, f32, None, *[int] * 5), scfg.threads),
        "vector_add": (tk_vadd.vector_add, (f32, f32, f32, int), 256),
    }
    sys.path.remove(str(tmp_path))
    for name in [n for n in sys.modules if n.startswith("tk_")]:
        del sys.modules[name]


def _trace(kern, specs, block, mode=None) -> dict:
    """The JSON record of one trace, the tracker forced to ``mode`` (None: its choice)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(trace_mod, "DependencyTracker", functools.partial(DependencyTracker, mode=mode))
        result = trace_kernel(
            kern.rewritten(),
            name=kern.name,
            bindings=kern._spec_bindings(specs, {}),
            block=(block, 1, 1) if isinstance(block, int) else tuple(block),
            target=Target.parse("sm_90a"),
            index_bits=kern.index_bits,
            track_files=True,
        )
    return json.loads(json.dumps(result.deps.to_json()))


def test_every_mode_records_what_the_profile_hook_records(user_kernels):
    for name, (kern, specs, block) in user_kernels.items():
        reference = _trace(kern, specs, block, "hook")
        assert _trace(kern, specs, block) == reference, name
        profiler = cProfile.Profile()
        profiler.enable()
        try:
            shared = _trace(kern, specs, block)
        finally:
            profiler.disable()
        # sharing a running profiler records exactly what the hook records, or, where the
        # profiler's statistics show nothing of the trace, marks it unverifiable (never
        # stored): an empty record would be served after the user's files changed
        assert shared == reference or set(shared) == {"unverifiable"}, name
        if name != "gemm":  # the GEMM's epilogue reads llvmlite types (see test_cache_explain)
            assert reference["files"] and reference["values"], name
            assert Dependencies.still_valid(reference)


def test_compiling_under_cprofile_works_and_the_profile_sees_the_trace(user_kernels):
    kern, specs, block = user_kernels["vector_add"]
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        record = _trace(kern, specs, block)
        assert sys.getprofile() is profiler  # left in place
    finally:
        profiler.disable()
    assert record == _trace(kern, specs, block, "hook")
    names = {f for (_file, _line, f) in pstats.Stats(profiler).stats}
    assert "trace_kernel" in names and "vector_add" in names  # the trace is in the profile


def test_another_profile_hook_is_chained_and_restored(user_kernels):
    kern, specs, block = user_kernels["vector_add"]
    seen: list[str] = []

    def hook(frame, event, arg):
        if event == "call":
            seen.append(frame.f_code.co_name)

    sys.setprofile(hook)
    try:
        record = _trace(kern, specs, block)
        assert sys.getprofile() is hook
    finally:
        sys.setprofile(None)
    assert "vector_add" in seen and "trace_kernel" in seen  # it saw the whole trace
    assert record == _trace(kern, specs, block, "hook")


def test_a_profiler_that_cannot_be_shared_leaves_the_record_unverifiable(monkeypatch):
    """A C extension's profiler object (not callable from Python) is left alone."""
    monkeypatch.setattr(sys, "monitoring", None, raising=False)
    monkeypatch.delattr(sys, "monitoring")

    class CProfiler:  # what sys.getprofile() returns for such a profiler
        pass

    monkeypatch.setattr(sys, "getprofile", lambda: CProfiler())
    deps = Dependencies()
    t = DependencyTracker(deps)
    t.start()
    t.stop()
    assert t.mode == "blind" and "CProfiler" in deps.to_json()["unverifiable"]


def test_a_bad_mode_is_refused():
    with pytest.raises(ValueError, match="not one of"):
        DependencyTracker(Dependencies(), "fast")


# ------------------------------------------------------------- generated call graphs

HELPERS = 5


def _program(calls: list[int], via: list[str]) -> str:
    """A user module: helper i reads global Gi and, when ``calls`` says so, calls helper
    ``calls[i]`` directly, through getattr, or as a callback of a library function."""
    lines = ["import functools", "import operator", ""]
    for i in range(HELPERS):
        lines.append(f"G{i} = ({i}, 'g{i}')")
        lines.append(f"U{i} = {i * 10}  # never read unless h{i} runs")
    for i in range(HELPERS):
        body = [f"def h{i}(x):", f"    y = x + G{i}[0] + U{i}"]
        j = calls[i]
        if j > i:  # acyclic
            if via[i] == "direct":
                body.append(f"    y += h{j}(x)")
            elif via[i] == "getattr":
                body.append(f"    y += globals()['h' + str({j})](x)")
            else:  # a callback run by C code of the standard library
                body.append(f"    y += functools.reduce(operator.add, map(h{j}, [x]))")
        body.append("    return y")
        lines += body + [""]
    return "\n".join(lines)


def _expected(calls: list[int], via: list[str], mod: str) -> set[tuple[str, ...]]:
    """Brute force: the globals of every helper that runs, from h0 on."""
    out: set[tuple[str, ...]] = set()
    i = 0
    while True:
        out |= {(mod, f"G{i}"), (mod, f"U{i}")}
        j = calls[i]
        if j <= i:
            return out
        if via[i] == "direct":
            out.add((mod, f"h{j}"))
        elif via[i] == "getattr":
            out |= {(mod, "globals"), (mod, "str")}
        else:
            out |= {(mod, "functools"), (mod, "operator"), (mod, "map"), (mod, f"h{j}")}
            # attributes of modules named by the code: functools.reduce, operator.add
            out |= {(mod, "functools", "reduce"), (mod, "operator", "add")}
        i = j


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.integers(0, HELPERS - 1), min_size=HELPERS, max_size=HELPERS),
    st.lists(
        st.sampled_from(["direct", "getattr", "callback"]), min_size=HELPERS, max_size=HELPERS
    ),
)
def test_generated_call_graphs_record_exactly_the_code_that_ran(tmp_path_factory, calls, via):
    path = tmp_path_factory.mktemp("graph")
    mod = f"tk_graph_{abs(hash((tuple(calls), tuple(via))))}"
    (path / f"{mod}.py").write_text(textwrap.dedent(_program(calls, via)))
    sys.path.insert(0, str(path))
    try:
        module = __import__(mod)
        records = {}
        for mode in ("hook", FAST, "shared"):
            deps = Dependencies()
            profiler = cProfile.Profile() if mode == "shared" else None
            if profiler is not None:
                profiler.enable()
            t = DependencyTracker(deps, None if mode == "shared" else mode)
            t.start()
            try:
                module.h0(1)
            finally:
                t.stop()
                if profiler is not None:
                    profiler.disable()
            records[mode] = deps.to_json()
        paths = {tuple(p) for p, _lenient, _d in records["hook"]["values"]}
        assert paths == _expected(calls, via, mod)
        assert list(records["hook"]["files"]) == [str(path / f"{mod}.py")]
        assert records[FAST] == records["hook"] == records["shared"]
    finally:
        sys.path.remove(str(path))
        sys.modules.pop(mod, None)


def test_tracker_modes_are_documented():
    assert set(tracker_mod.MODES) == {"monitoring", "lsprof", "shared", "hook", "blind"}
    for mode in tracker_mod.MODES:
        assert f'``"{mode}"``' in tracker_mod.__doc__


# ------------------------------------------------------------- kernels of tylo's own


def _user_fn(x):
    return x


class _UserThing:
    def __init__(self, v):
        self.v = v


def _leaf(kind: str):
    """A value, and whether it is (or holds) code from a user's file: this test file."""
    from tylo.layouts import Layout
    from tylo.ops.gemm import host

    return {
        "int": (3, False),
        "str": ("tile", False),
        "dtype": (tylo.bf16, False),
        "layout": (Layout((4, 8), (8, 1)), False),
        "tylo function": (host.choose_config, False),
        "user function": (_user_fn, True),
        "user lambda": (lambda: 1, True),
        "user class": (_UserThing, True),
        "user instance": (_UserThing(2), True),
        "partial of user": (functools.partial(_user_fn, 1), True),
        "tylo inline of user": (tylo.inline(_user_fn), True),
    }[kind]


def _build(tree):
    """A nested value from ``tree`` (a leaf kind, or (container, children))."""
    import types as _types

    if isinstance(tree, str):
        return _leaf(tree)
    container, children = tree
    built = [_build(c) for c in children]
    values, user = [v for v, _ in built], any(u for _, u in built)
    if container == "tuple":
        return tuple(values), user
    if container == "list":
        return values, user
    if container == "dict":
        return {f"k{i}": v for i, v in enumerate(values)}, user
    return _types.SimpleNamespace(**{f"a{i}": v for i, v in enumerate(values)}), user


LEAVES = st.sampled_from(
    ["int", "str", "dtype", "layout", "tylo function", "user function", "user lambda",
     "user class", "user instance", "partial of user", "tylo inline of user"]
)  # fmt: skip
TREES = st.recursive(
    LEAVES,
    lambda c: st.tuples(st.sampled_from(["tuple", "list", "dict", "namespace"]),
                        st.lists(c, max_size=3)),
    max_leaves=8,
)  # fmt: skip


@settings(max_examples=80, deadline=None)
@given(st.lists(TREES, max_size=3))
def test_user_code_is_found_wherever_the_static_values_hold_it(trees):
    from tylo.ops.softmax.kernel import row_softmax_kernel as shipped

    built = [_build(t) for t in trees]
    statics, user = [v for v, _ in built], any(u for _, u in built)
    assert tracker_mod.may_run_user_code(shipped.rewritten(), statics) is user
    assert tracker_mod.may_run_user_code(_user_fn, statics) is True  # a user kernel: always


def test_shipped_kernels_trace_with_no_hook_and_record_the_same(monkeypatch):
    """The shipped GEMM and softmax: no tracker starts, and the record equals what a
    tracker would have recorded (nothing: they run only tylo's code)."""
    from tylo.ops.gemm import host as gh
    from tylo.ops.softmax import host as sh
    from tylo.ops.softmax import plan as sp

    cfg = gh.choose_config(4096, 4096, 4096, 4096, 4096, ldd=4096, dtype=tylo.bf16)
    a = tylo.pointer(cfg.dtype, align=16)
    d = tylo.pointer(tylo.f32, align=16) if cfg.epilogue == "staged" else tylo.f32
    scfg = sp.choose_config(4096, 4096, vec=4)
    f32 = tylo.pointer(tylo.f32)
    started: list[str] = []

    class Spy(DependencyTracker):
        def start(self) -> None:
            started.append("start")
            super().start()

    for kern, specs, block in (
        (gh.tiled_gemm_kernel, (cfg, d, a, a, *[int] * 6, float, False), cfg.plan.threads),
        (sh.kernel_for(scfg), (scfg, f32, f32, None, *[int] * 5), scfg.threads),
    ):
        monkeypatch.setattr(trace_mod, "DependencyTracker", Spy)
        result = trace_kernel(
            kern.rewritten(), name=kern.name, bindings=kern._spec_bindings(specs, {}),
            block=(block, 1, 1) if isinstance(block, int) else tuple(block),
            target=Target.parse("sm_90a"), index_bits=kern.index_bits, track_files=True,
        )  # fmt: skip
        record = json.loads(json.dumps(result.deps.to_json()))
        assert started == []
        monkeypatch.setattr(trace_mod, "may_run_user_code", lambda fn, statics: True)
        assert _trace(kern, specs, block) == record == {"files": {}, "values": []}
        monkeypatch.undo()
