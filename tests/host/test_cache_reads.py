"""What a trace read, and the re-check before a first-level cache hit
(:mod:`tylo.kernel.reads`): every global, module attribute and class attribute the traced
code names is recorded, and any later difference fails the check; a value without a
stable text makes the trace unverifiable (not stored). Across processes:
tests/gpu/test_cache_process.py (compile-only half).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tylo
from tylo.backend.cache import DiskCache, cache_dir
from tylo.kernel import diskcache
from tylo.kernel.reads import Dependencies, _Unstable, code_digest, stable_text
from tylo.kernel.trace import trace_kernel
from tylo.target import Target

OTHER = """
ATTR = 1
"""
SUB = """
TABLE = (4, 5)
"""
MAIN = """
import math
import rd_other
import rd_pkg.sub

CONST = {"a": 1, "b": [1, 2]}


class Config:
    TILE = 16


def scale():
    return 3


def helper(x):
    y = x * CONST["a"] + rd_other.ATTR + rd_pkg.sub.TABLE[0] + Config.TILE
    return y + len(CONST["b"]) + int(math.pi) + scale()
"""
KERNEL = """
import tylo
import rd_other

CONST = {"a": 1.5}


@tylo.kernel
def k(out, n):
    i = tylo.thread_idx.x
    if i < n:
        out[i] = CONST["a"] + rd_other.ATTR
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "rd_pkg").mkdir()
    (tmp_path / "rd_pkg" / "__init__.py").write_text("")
    (tmp_path / "rd_pkg" / "sub.py").write_text(SUB)
    (tmp_path / "rd_other.py").write_text(OTHER)
    (tmp_path / "rd_main.py").write_text(MAIN)
    (tmp_path / "rd_kern.py").write_text(textwrap.dedent(KERNEL))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [n for n in sys.modules if n.startswith("rd_")]:
        del sys.modules[name]


def recorded(fn) -> dict:
    deps = Dependencies()
    deps.add_code(fn.__code__, fn.__globals__)
    record = json.loads(json.dumps(deps.to_json()))  # as stored
    assert "unverifiable" not in record, record
    return record


def changes(record, target, name, new) -> bool:
    """Whether setting ``target.name = new`` fails the check, and restoring passes it."""
    old = getattr(target, name)
    setattr(target, name, new)
    try:
        changed = not Dependencies.still_valid(record)
    finally:
        setattr(target, name, old)
    return changed and Dependencies.still_valid(record)


def test_every_read_value_is_rechecked(project):
    import rd_main
    import rd_other
    import rd_pkg.sub

    record = recorded(rd_main.helper)
    assert Dependencies.still_valid(record)
    assert changes(record, rd_main, "CONST", {"a": 2, "b": [1, 2]})  # a dict entry
    assert changes(record, rd_main, "CONST", {"a": 1, "b": [1, 2, 3]})  # nested list
    assert changes(record, rd_other, "ATTR", 2)  # another module's attribute
    assert changes(record, rd_pkg.sub, "TABLE", (9, 5))  # through a package
    assert changes(record, rd_main.Config, "TILE", 32)  # a class attribute
    assert changes(record, rd_main, "scale", lambda: 4)  # a function named differently
    rd_main.CONST["a"] = 7  # mutated in place: the same object, another value
    assert not Dependencies.still_valid(record)
    rd_main.CONST["a"] = 1
    assert Dependencies.still_valid(record)


def test_a_global_shadowing_a_builtin_fails_the_check(project):
    import rd_main

    record = recorded(rd_main.helper)
    rd_main.len = lambda x: 0
    try:
        assert not Dependencies.still_valid(record)
    finally:
        del rd_main.len
    assert Dependencies.still_valid(record)


def test_a_module_not_imported_fails_the_check(project):
    import rd_main

    record = recorded(rd_main.helper)  # values are found from the code's own module
    saved = sys.modules.pop("rd_main")
    try:
        assert not Dependencies.still_valid(record)
    finally:
        sys.modules["rd_main"] = saved
    assert Dependencies.still_valid(record)


def test_closures_and_defaults_are_part_of_a_function_value():
    def make(k, d):
        def f(x, y=d):
            return x * k + y

        return f

    assert stable_text(make(1, 2)) == stable_text(make(1, 2))
    assert stable_text(make(1, 2)) != stable_text(make(3, 2))
    assert stable_text(make(1, 2)) != stable_text(make(1, 5))
    with pytest.raises(_Unstable):
        stable_text(make(object(), 2))


def test_a_function_value_includes_its_code(tmp_path):
    ns_a: dict = {}
    ns_b: dict = {}
    path = str(tmp_path / "f.py")
    (tmp_path / "f.py").write_text("")
    src = "def f(x):\n    return x in {'a', 'b', 'c'} and (lambda: 1)()"
    exec(compile(src, path, "exec"), ns_a)  # noqa: S102
    exec(compile(src.replace("'c'", "'d'"), path, "exec"), ns_b)  # noqa: S102
    assert stable_text(ns_a["f"]) != stable_text(ns_b["f"])  # same name and file, other code
    exec(compile(src, "<string>", "exec"), ns_b)  # noqa: S102
    with pytest.raises(_Unstable, match="no source file"):  # its reads could not be checked
        stable_text(ns_b["f"])
    code = ns_a["f"].__code__
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]); from tylo.kernel.reads import "
        "code_digest\nns = {}\nexec(\"def f(x):\\n    return x in {'a', 'b', 'c'} and "
        "(lambda: 1)()\", ns)\nprint(code_digest(ns['f'].__code__))"
    )
    import subprocess

    root = str(Path(tylo.__file__).parents[1])
    outs = {
        subprocess.run(
            [sys.executable, "-c", script, root],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        ).stdout.strip()
        for seed in ("1", "2")
    }
    assert outs == {code_digest(code)}  # string hashing differs, the digest does not


def test_kernels_without_a_source_file_get_no_first_level_key(tmp_path):
    """Code from exec or ``python -c`` has no file to hash: the lookup could not check
    it, so such kernels always trace (their cubin still comes from the IR cache)."""
    src = "def k(out, n):\n    out[0] = 1.0\n"
    keys = []
    for filename in ("<string>", str(tmp_path / "k.py")):
        (tmp_path / "k.py").write_text(src)
        ns: dict = {"__name__": "rd_exec"}
        exec(compile(src, filename, "exec"), ns)  # noqa: S102
        kern = tylo.kernel(ns["k"])
        bindings = kern._spec_bindings((tylo.f32, int), {})
        target = Target.parse("sm_90a")
        keys.append(diskcache.specialization_key(kern, bindings, (32, 1, 1), target))
    assert keys[0] is None and keys[1] is not None


def test_partials_and_lru_cached_functions_are_what_they_wrap():
    import functools

    def make(k):
        @functools.cache
        def plan(x):
            return x * k

        return plan

    p = make(2)
    before = stable_text(p)
    assert p(3) == 6 and p.cache_info().currsize == 1  # a filled memo changes nothing
    assert stable_text(p) == before == stable_text(make(2)) != stable_text(make(3))
    part = functools.partial(make(2), 4)
    assert stable_text(part) == stable_text(functools.partial(make(2), 4))
    assert stable_text(part) != stable_text(functools.partial(make(2), 5))


def test_tylo_inline_helpers_are_their_wrapped_function():
    """tylo.inline's wrapper memoizes the rewritten helper in its closure on first call:
    that must not change the helper's text (else every later trace would miss)."""

    def make(k):
        def helper(x):
            return x * k

        return tylo.inline(helper)

    h = make(2)
    before = stable_text(h)
    assert h(1.5) == 3.0
    memos = [c.cell_contents for c in h.__closure__ if isinstance(c.cell_contents, dict)]
    assert memos and all(memos)  # the wrapper did fill its memo
    assert stable_text(h) == before == stable_text(make(2))
    assert stable_text(make(3)) != before  # the wrapped function's closure still counts


def test_a_value_without_stable_text_makes_the_trace_unverifiable(project, tmp_path, monkeypatch):
    import rd_main

    monkeypatch.setenv("TYLO_CACHE_DIR", str(tmp_path / "cache"))
    rd_main.Config.TILE = object()
    deps = Dependencies()
    deps.add_code(rd_main.helper.__code__, rd_main.helper.__globals__)
    record = deps.to_json()
    assert "Config.TILE" in record["unverifiable"]
    assert not Dependencies.still_valid(record)

    class Module:
        ptx, cubin, info_log, llvm = ".version 9.0", b"\x7fELF", "", ""

    diskcache.store("ab" * 32, Module(), {"deps": record})
    assert not DiskCache(cache_dir()).path("ab" * 32).exists()
    diskcache.store("ab" * 32, Module(), {"deps": {"files": {}, "values": []}})
    assert DiskCache(cache_dir()).path("ab" * 32).exists()  # the same, verifiable: stored


def test_a_real_trace_records_dict_entries_and_module_attributes(project):
    import rd_kern
    import rd_other

    k = rd_kern.k
    result = trace_kernel(
        k.rewritten(),
        name=k.name,
        bindings=k._spec_bindings((tylo.f32, int), {}),
        block=(32, 1, 1),
        target=Target.parse("sm_90a"),
        index_bits=64,
        track_files=True,
    )
    record = json.loads(json.dumps(result.deps.to_json()))
    assert Dependencies.still_valid(record)
    assert str(Path(rd_kern.__file__)) in record["files"]
    assert changes(record, rd_kern, "CONST", {"a": 2.5})
    assert changes(record, rd_other, "ATTR", 3)


junk = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8)),
    lambda c: st.one_of(
        st.lists(c, max_size=4), st.dictionaries(st.text(max_size=6), c, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(junk)
def test_malformed_records_fail_the_check_without_raising(record):
    files = record.get("files", {}) if isinstance(record, dict) else None
    values = record.get("values", []) if isinstance(record, dict) else None
    empty = (
        isinstance(record, dict)
        and "unverifiable" not in record
        and type(files) is dict
        and not files
        and type(values) is list
        and not values
    )
    assert Dependencies.still_valid(record) is empty  # only "nothing was read" passes


plain = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=False),
        st.text(max_size=4),
        st.binary(max_size=3),
    ),
    lambda c: st.one_of(
        st.lists(c, max_size=3),
        st.lists(c, max_size=3).map(tuple),
        st.dictionaries(st.one_of(st.text(max_size=3), st.integers(-3, 3)), c, max_size=3),
        st.frozensets(st.integers(-5, 5), max_size=3),
    ),
    max_leaves=10,
)


def same(a, b) -> bool:
    """Equal values of equal types all the way down (1 and 1.0 and True differ)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        keys = {(type(k), k) for k in a}
        return keys == {(type(k), k) for k in b} and all(same(a[k], b[k]) for k in a)
    if isinstance(a, float):
        return repr(a) == repr(b)
    return a == b


@settings(max_examples=200, deadline=None)
@given(plain, plain)
def test_stable_text_is_equal_exactly_for_equal_values(a, b):
    assert stable_text(a) == stable_text(copy.deepcopy(a))
    assert (stable_text(a) == stable_text(b)) == same(a, b)


def test_deep_or_cyclic_values_have_no_stable_text():
    cyclic: list = []
    cyclic.append(cyclic)
    with pytest.raises((_Unstable, RecursionError)):
        stable_text(cyclic)
    deep: list = []
    for _ in range(100):
        deep = [deep]
    with pytest.raises(_Unstable, match="nested too deeply"):
        stable_text(deep)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs os.mkfifo (POSIX)")
def test_a_forged_file_record_is_never_read_blocking(tmp_path):
    """Paths in a record come from the cache: a FIFO or a device fails the check at once
    (opening a FIFO normally blocks, reading /dev/zero never ends)."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in (str(fifo), "/dev/zero", str(tmp_path), str(tmp_path / "missing"), "a\0b"):
        assert not Dependencies.still_valid({"files": {path: "0" * 64}, "values": []})
    real = tmp_path / "real.py"
    real.write_text("x = 1\n")
    digest = hashlib.sha256(real.read_bytes()).hexdigest()
    assert Dependencies.still_valid({"files": {str(real): digest}, "values": []})
