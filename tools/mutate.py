"""A small mutation runner for tylo: plant one-line bugs, run each module's fast tests.

Each *mutant* is one small change to one module's syntax tree:

- ``cmp``: a comparison operator flipped (``<`` and ``<=``, ``>`` and ``>=``, ``==`` and
  ``!=``, ``is`` and ``is not``, ``in`` and ``not in``);
- ``int``: an integer constant plus or minus one;
- ``boolop``: ``and`` and ``or`` swapped;
- ``not``: the condition of an ``if``, ``while``, conditional expression or ``assert``
  negated;
- ``return``: a returned value replaced by ``None`` (``True`` and ``False`` swapped);
- ``raise``: a ``raise`` statement dropped (replaced by ``pass``).

Constants inside error messages (f-strings, a ``raise`` statement's arguments), ``__all__``,
``if TYPE_CHECKING:`` blocks and ``__repr__`` / ``_repr_svg_`` are left alone.

For every mutant the runner writes the mutated module into a private copy of the repository
(the working tree is never touched), runs the module's mapped tests (:data:`TESTS`, plus the
module's own doctests) with ``pytest -x`` under a timeout, and sorts the mutant: *killed* (a
test failed or the module no longer imports), *survived* (every test passed), *timeout*.
The kill rate counts timeouts as killed. It ends with the kill table and the survivors
(``file:line  mutation``), and exits 1 when a module's unmutated tests fail::

    nice python tools/mutate.py --modules tylo/nvgpu/tma.py --sample 40 --seed 1 --jobs 1

Mutants are numbered per module in a fixed order, so ``--sample N --seed S`` picks the same
mutants while the module's source is unchanged; ``--ids path#n,...`` reruns chosen ones.
``--root DIR`` mutates another checkout (an exported commit, for a before/after table).
The run is slow (seconds per mutant) and is not part of the test suite.
"""

from __future__ import annotations

import argparse
import ast
import concurrent.futures
import glob
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_LAYOUT_TESTS = [
    "tests/host/layouts/test_examples.py",
    "tests/host/layouts/test_properties.py",
]
# the launch paths traced and compiled, launched into a recorder (libNVVM, no GPU)
_LAUNCH_TESTS = [
    "tests/nvvm/test_trace_launch.py",
    "tests/nvvm/test_cluster_launch_paths.py",
    "tests/nvvm/test_launch_args_nvvm.py",
    "tests/host/test_mutants_launch*.py",
]
# module -> its fast tests (globs, relative to the root; a glob matching nothing is skipped,
# so tests added later under these names join the run)
TESTS: dict[str, list[str]] = {
    "tylo/layouts/swizzle.py": [
        *_LAYOUT_TESTS,
        "tests/host/layouts/test_inverse_swizzled.py",
        "tests/host/proofs/test_swizzle_tv.py",
        "tests/host/test_isa_swizzle*.py",
        "tests/host/test_mutants_layouts*.py",
    ],
    "tylo/layouts/inttuple.py": [*_LAYOUT_TESTS, "tests/host/test_mutants_layouts*.py"],
    "tylo/layouts/layout.py": [
        *_LAYOUT_TESTS,
        "tests/host/layouts/test_errors.py",
        "tests/host/test_mutants_layouts*.py",
    ],
    "tylo/layouts/compose.py": [
        "tests/host/layouts/test_composition_exact.py",
        *_LAYOUT_TESTS,
        "tests/host/test_mutants_layouts*.py",
    ],
    "tylo/layouts/inverse.py": [
        "tests/host/layouts/test_inverse_exact.py",
        "tests/host/layouts/test_inverse_swizzled.py",
        *_LAYOUT_TESTS,
        "tests/host/test_mutants_layouts*.py",
    ],
    "tylo/layouts/tv.py": [
        "tests/host/layouts/test_examples.py",
        "tests/host/test_isa_mma*.py",
        "tests/host/test_fragment.py",
        "tests/host/test_mutants_layouts*.py",
    ],
    "tylo/nvgpu/warpgroup/descriptor.py": [
        "tests/host/test_wgmma_descriptor.py",
        "tests/host/test_isa_wgmma*.py",
        "tests/host/test_mutants_nvgpu*.py",
    ],
    "tylo/nvgpu/tma.py": [
        "tests/host/test_tma_plan.py",
        "tests/host/test_launch_tensor_maps.py",
        "tests/gpu/test_tma.py",  # its compile-only tests: the kernel-side refusals
        "tests/nvvm/test_cluster_ops.py",  # multicast loads
        "tests/host/test_isa_tma*.py",
        "tests/host/test_mutants_nvgpu*.py",
    ],
    "tylo/nvgpu/warp/mma.py": [
        "tests/host/test_mma_plan.py",
        "tests/host/test_mma_chain.py",
        "tests/host/test_isa_mma*.py",
        "tests/host/test_mutants_nvgpu*.py",
    ],
    "tylo/nvgpu/warp/ldmatrix.py": [
        "tests/host/test_mma_plan.py",
        "tests/host/test_mma_plan_gemm.py",
        "tests/host/test_stmatrix_plan.py",  # stmatrix plans use its row finder
        "tests/host/test_isa_mma*.py",
        "tests/host/test_mutants_nvgpu*.py",
    ],
    "tylo/nvgpu/warp/stmatrix.py": [
        "tests/host/test_stmatrix_plan.py",
        "tests/host/test_isa_mma*.py",
        "tests/host/test_mutants_nvgpu*.py",
    ],
    "tylo/kernel/readers.py": [
        "tests/host/test_launch_args.py",
        "tests/host/test_launch_tensor_maps.py",
        *_LAUNCH_TESTS,
    ],
    "tylo/kernel/launch.py": [
        "tests/host/test_launch_args.py",
        "tests/host/test_launch_tensor_maps.py",
        *_LAUNCH_TESTS,
    ],
}

_FLIP = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
_SYMBOL = {
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.In: "in",
    ast.NotIn: "not in",
}
_FLAGS = "doctest_optionflags=ELLIPSIS NORMALIZE_WHITESPACE"
_SKIP_FUNCTIONS = {"__repr__", "_repr_svg_"}


@dataclass(frozen=True)
class Mutant:
    """One mutation: ``node`` is the index of the mutated node in ``ast.walk`` order of the
    module, ``choice`` which of that node's mutations, ``text`` what it does."""

    path: str
    number: int
    node: int
    choice: int
    line: int
    kind: str
    text: str

    @property
    def ident(self) -> str:
        return f"{self.path}#{self.number}"


def _skipped(tree: ast.AST) -> set[int]:
    """ids of the nodes no mutation may touch (messages, ``__all__``, type-checking blocks)."""
    out: set[int] = set()

    def mark(n: ast.AST) -> None:
        out.update(id(x) for x in ast.walk(n))

    for n in ast.walk(tree):
        if isinstance(n, (ast.JoinedStr, ast.Raise)):
            for f in ("exc", "cause", "values"):
                v = getattr(n, f, None)
                for x in v if isinstance(v, list) else [v]:
                    if isinstance(x, ast.AST):
                        mark(x)
        elif isinstance(n, ast.If) and "TYPE_CHECKING" in ast.unparse(n.test):
            mark(n)
        elif isinstance(n, (ast.Assign, ast.AnnAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                mark(n)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name in _SKIP_FUNCTIONS:
            mark(n)
        elif isinstance(n, ast.keyword) and n.arg == "maxsize":
            mark(n)  # cache sizes: every value is equivalent
        elif isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant):
            mark(n)  # docstrings
    return out


def _choices(n: ast.AST) -> list[tuple[str, str]]:
    """The mutations of one node: (kind, description) in a fixed order."""
    out = []
    if isinstance(n, ast.Compare):
        for i, op in enumerate(n.ops):
            if type(op) in _FLIP:
                new = _FLIP[type(op)]
                out.append(("cmp", f"#{i} {_SYMBOL[type(op)]} -> {_SYMBOL[new]}"))
    elif isinstance(n, ast.Constant) and type(n.value) is int:
        out += [("int", f"{n.value} -> {n.value + 1}"), ("int", f"{n.value} -> {n.value - 1}")]
    elif isinstance(n, ast.BoolOp):
        new = "or" if isinstance(n.op, ast.And) else "and"
        out.append(("boolop", f"{'and' if new == 'or' else 'or'} -> {new}"))
    elif isinstance(n, (ast.If, ast.While, ast.IfExp, ast.Assert)):
        out.append(("not", f"negate `{ast.unparse(n.test)[:60]}`"))
    elif isinstance(n, ast.Return) and n.value is not None:
        v = n.value
        if isinstance(v, ast.Constant) and type(v.value) is bool:
            out.append(("return", f"return {v.value} -> return {not v.value}"))
        elif not (isinstance(v, ast.Constant) and v.value is None):
            out.append(("return", f"return `{ast.unparse(v)[:60]}` -> return None"))
    elif isinstance(n, ast.Raise):
        out.append(("raise", "drop the raise"))
    return out


def mutants_of(source: str, path: str) -> list[Mutant]:
    """Every mutant of one module's source, numbered in ``ast.walk`` order."""
    tree = ast.parse(source)
    skip = _skipped(tree)
    out: list[Mutant] = []
    for i, n in enumerate(ast.walk(tree)):
        if id(n) in skip:
            continue
        for c, (kind, text) in enumerate(_choices(n)):
            line = getattr(n, "lineno", 0)
            out.append(Mutant(path, len(out), i, c, line, kind, text))
    return out


def _parents(tree: ast.AST) -> dict[int, tuple[list, int]]:
    out = {}
    for n in ast.walk(tree):
        for _, v in ast.iter_fields(n):
            if isinstance(v, list):
                for j, x in enumerate(v):
                    if isinstance(x, ast.stmt):
                        out[id(x)] = (v, j)
    return out


def apply(source: str, m: Mutant) -> str:
    """The module's source with mutant ``m`` applied."""
    tree = ast.parse(source)
    n = next(x for i, x in enumerate(ast.walk(tree)) if i == m.node)
    if m.kind == "cmp":
        ops = [i for i, op in enumerate(n.ops) if type(op) in _FLIP]
        i = ops[m.choice]
        n.ops[i] = _FLIP[type(n.ops[i])]()
    elif m.kind == "int":
        n.value += 1 if m.choice == 0 else -1
    elif m.kind == "boolop":
        n.op = ast.Or() if isinstance(n.op, ast.And) else ast.And()
    elif m.kind == "not":
        n.test = ast.UnaryOp(ast.Not(), n.test)
    elif m.kind == "return":
        v = n.value
        is_bool = isinstance(v, ast.Constant) and type(v.value) is bool
        n.value = ast.Constant(not v.value) if is_bool else ast.Constant(None)
    elif m.kind == "raise":
        body, j = _parents(tree)[id(n)]
        body[j] = ast.Pass()
    ast.fix_missing_locations(tree)
    return ast.unparse(tree) + "\n"


@dataclass
class Result:
    """One mutant's outcome: ``status`` is killed, survived or timeout."""

    ident: str
    path: str
    line: int
    kind: str
    text: str
    status: str
    seconds: float
    detail: str = ""


def tests_for(root: Path, module: str) -> list[str]:
    """The mapped test files of a module that exist under ``root``, then the module itself
    (for its doctests)."""
    out = []
    for pattern in TESTS[module]:
        out += sorted(str(Path(p).relative_to(root)) for p in glob.glob(str(root / pattern)))
    return list(dict.fromkeys(out)) + [module]


def _pytest(
    work: Path, files: list[str], timeout: float, write_pyc: bool = False
) -> tuple[str, float, str]:
    """Run pytest on ``files`` in ``work``; (status, seconds, last line of output). Only the
    baseline run writes bytecode, so a mutant's is never cached."""
    env = dict(os.environ, PYTHONPATH=str(work))
    if not write_pyc:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    shutil.rmtree(work / ".hypothesis", ignore_errors=True)  # no replay between mutants
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-n", "0"]
    cmd += ["--hypothesis-seed=0", "--doctest-modules", "-o", _FLAGS, *files]
    t0 = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        cwd=work,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        text=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return "timeout", time.monotonic() - t0, ""
    lines = [x for x in out.strip().splitlines() if x.strip()]
    last = lines[-1] if lines else ""
    status = "survived" if proc.returncode == 0 else "killed"
    if proc.returncode not in (0, 1, 2):
        status = f"error rc={proc.returncode}"
    return status, time.monotonic() - t0, last


def _copy_tree(root: Path, dest: Path) -> None:
    ignore = shutil.ignore_patterns(".git", "build", "__pycache__", ".hypothesis", "*.pyc")
    for name in ("tylo", "tests", "examples", "docs", "tools"):
        if (root / name).exists():
            shutil.copytree(root / name, dest / name, ignore=ignore)
    for name in ("pyproject.toml", "mkdocs.yml", "README.md"):
        if (root / name).exists():
            shutil.copy2(root / name, dest / name)


def _run_one(work: Path, m: Mutant, files: list[str], timeout: float) -> Result:
    target = work / m.path
    original = target.read_text()
    stamp = target.stat().st_mtime_ns
    try:
        target.write_text(apply(original, m))
        # a new mtime: the unmutated module's cached bytecode no longer matches it
        os.utime(target, ns=(stamp + 10**9, stamp + 10**9))
        status, secs, last = _pytest(work, files, timeout)
    finally:
        target.write_text(original)
        os.utime(target, ns=(stamp, stamp))  # ...and matches again
    return Result(m.ident, m.path, m.line, m.kind, m.text, status, round(secs, 2), last)


def run(
    root: Path, mutants: list[Mutant], jobs: int, timeout: float | None, log=print
) -> tuple[list[Result], dict[str, str]]:
    """Run every mutant; returns the results and, per module, a baseline failure (if any;
    such a module's mutants are not run)."""
    base = Path(tempfile.mkdtemp(prefix="tylo-mutate-"))
    works = []
    try:
        for j in range(max(1, jobs)):
            works.append(base / f"job{j}")
            _copy_tree(root, works[-1])
        limits, broken = {}, {}
        for module in sorted({m.path for m in mutants}):
            for w in works:  # also writes each copy's bytecode of the unmutated modules
                status, secs, last = _pytest(w, tests_for(w, module), 600, write_pyc=True)
            if status != "survived":
                broken[module] = f"{status}: {last}"
                log(f"baseline {module}: FAILS ({last}); its mutants are skipped")
                continue
            limits[module] = timeout or max(30.0, 4 * secs)
            log(f"baseline {module}: {last} ({secs:.1f} s; timeout {limits[module]:.0f} s)")
        todo = [m for m in mutants if m.path in limits]
        results: list[Result] = []
        free = list(works)

        def task(m: Mutant) -> Result:
            w = free.pop()
            try:
                return _run_one(w, m, tests_for(w, m.path), limits[m.path])
            finally:
                free.append(w)

        with concurrent.futures.ThreadPoolExecutor(max_workers=len(works)) as pool:
            for k, r in enumerate(pool.map(task, todo), 1):
                results.append(r)
                log(f"[{k}/{len(todo)}] {r.status:8} {r.path}:{r.line} {r.kind}: {r.text}")
        return results, broken
    finally:
        shutil.rmtree(base, ignore_errors=True)


def table(results: list[Result]) -> str:
    """The kill table (one row per module and a total) and the survivors."""
    rows = []
    for module in sorted({r.path for r in results}) + ["total"]:
        rs = [r for r in results if module in ("total", r.path)]
        n = len(rs)
        k = sum(r.status == "killed" for r in rs)
        s = sum(r.status == "survived" for r in rs)
        t = sum(r.status == "timeout" for r in rs)
        rate = f"{100 * (k + t) / n:.1f}%" if n else "-"
        rows.append((module, n, k, s, t, rate))
    head = ("module", "mutants", "killed", "survived", "timeout", "kill rate")
    w = max(len(r[0]) for r in [head, *rows])
    lines = [f"| {head[0]:<{w}} | " + " | ".join(f"{h:>9}" for h in head[1:]) + " |"]
    lines.append(f"|{'-' * (w + 2)}|" + "|".join("-" * 11 for _ in head[1:]) + "|")
    for r in rows:
        lines.append(f"| {r[0]:<{w}} | " + " | ".join(f"{v:>9}" for v in r[1:]) + " |")
    surv = [r for r in results if r.status == "survived"]
    lines.append(f"\nsurvivors ({len(surv)}):")
    lines += [f"  {r.path}:{r.line}  [{r.ident}] {r.kind}: {r.text}" for r in surv]
    other = [r for r in results if r.status.startswith("error")]
    lines += [f"  ERROR {r.ident}: {r.status} {r.detail}" for r in other]
    return "\n".join(lines)


def select(root: Path, modules: list[str], sample: int | None, seed: int, ids: list[str]):
    """The mutants to run: all of each module's, a seeded sample of ``sample`` per module,
    or exactly ``ids``."""
    out = []
    for module in modules:
        ms = mutants_of((root / module).read_text(), module)
        if ids:
            ms = [m for m in ms if m.ident in ids]
        elif sample is not None and sample < len(ms):
            ms = sorted(
                random.Random(f"{seed}:{module}").sample(ms, sample), key=lambda m: m.number
            )
        out += ms
    return out


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--modules", nargs="*", help="module paths (default: every mapped module)")
    p.add_argument("--sample", type=int, help="at most N mutants per module, a seeded sample")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--jobs", type=int, default=1)
    p.add_argument("--timeout", type=float, help="seconds per mutant (default 4x baseline)")
    p.add_argument("--ids", default="", help="comma-separated mutant ids (path#n) to run")
    p.add_argument("--root", type=Path, default=ROOT, help="the checkout to mutate")
    p.add_argument("--list", action="store_true", help="count and list mutants; run nothing")
    p.add_argument("--json", type=Path, help="write the results here")
    a = p.parse_args(argv)
    root = a.root.resolve()
    ids = [x for x in a.ids.split(",") if x]
    modules = a.modules or sorted({i.split("#")[0] for i in ids}) or sorted(TESTS)
    unknown = [m for m in modules if m not in TESTS]
    if unknown:
        p.error(f"no tests mapped for {unknown}; add them to TESTS in tools/mutate.py")
    mutants = select(root, modules, a.sample, a.seed, ids)
    if a.list:
        for m in mutants:
            print(f"{m.ident}  {m.path}:{m.line}  {m.kind}: {m.text}")
        print(f"{len(mutants)} mutants")
        return 0
    results, broken = run(root, mutants, a.jobs, a.timeout)
    print(table(results))
    if a.json:
        a.json.write_text(json.dumps([asdict(r) for r in results], indent=1))
    for module, why in broken.items():
        print(f"BASELINE FAILS: {module}: {why}")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
