"""``tylo layout`` and ``tylo prove`` under hostile input: every table is bounded (a
2**40-row layout with any ``--limit`` returns at once), negative limits, integers past
Python's 4,300-digit conversion limit in every integer option, ``--set`` and ``--assume``
of names the layout does not have and empty file names are usage errors (exit 2, one line,
no traceback); a static layout past the enumeration budget that no rule settles is
unknown (exit 3), never a usage error."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tylo.cli import EXIT_FAILED, EXIT_OK, EXIT_UNKNOWN, EXIT_USAGE, main

MAX_ROWS = 65536  # docs/cli.md: a table prints at most 65,536 rows

ROOT = Path(__file__).resolve().parents[2]
SETTINGS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def one_line_usage(status: int, out: str, err: str) -> bool:
    return status == EXIT_USAGE and err.count("\n") == 1 and "Traceback" not in err


# ------------------------------------------------------------------------- bounded tables


def test_the_issue_example_returns_at_once() -> None:
    """``tylo layout 1099511627776:1 --limit -1`` built 2**40 rows and never returned."""
    r = subprocess.run(
        [sys.executable, "-m", "tylo.cli", "layout", "1099511627776:1", "--limit", "-1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert r.returncode == EXIT_USAGE and r.stdout == ""
    assert r.stderr == "tylo layout: error: --limit '-1': must be >= 0\n"


@SETTINGS
@given(
    n=st.one_of(
        st.integers(1, 300), st.integers(MAX_ROWS - 2, MAX_ROWS + 2), st.integers(1, 2**62)
    ),
    stride=st.integers(-(2**40), 2**40),
    limit=st.one_of(
        st.integers(-3, 300),
        st.integers(MAX_ROWS - 1, MAX_ROWS + 1),
        st.integers(-(2**70), 2**70),
    ),
)
def test_every_table_is_bounded(capsys, n, stride, limit) -> None:
    """For any size, stride and limit: a usage error exactly when the limit is negative,
    over MAX_ROWS, or 0 (all) of a table over MAX_ROWS rows; otherwise exactly
    min(n, limit or n) rows, each the brute-force offset i*stride."""
    status, out, err = run(capsys, "layout", f"{n}:{stride}", "--limit", str(limit))
    refused = limit < 0 or limit > MAX_ROWS or (limit == 0 and n > MAX_ROWS)
    if refused:
        assert one_line_usage(status, out, err) and out == "", err
        return
    assert status == EXIT_OK, err
    want = n if limit == 0 else min(n, limit)
    lines = out.splitlines()
    rows = lines[lines.index("") + 2 :]
    body = [r for r in rows if not r.startswith("...")]
    assert [int(r.split()[2]) for r in body] == [i * stride for i in range(want)]
    assert len(rows) == want + (want < n)  # one "... N more" line when cut


@SETTINGS
@given(tile=st.tuples(st.integers(1, 2**20), st.integers(1, 2**20)), limit=st.integers(0, 3))
def test_tv_tables_are_bounded(capsys, tile, limit) -> None:
    """``--tv`` over any tile answers at once: a table, or a typed refusal (the picture
    layer's MAX_CELLS or the row bound), never a hang."""
    status, out, err = run(
        capsys, "layout", "(4,2):(2,1)", "--tv", f"{tile[0]},{tile[1]}", "--limit", str(limit)
    )
    assert status in (EXIT_OK, EXIT_USAGE) and "Traceback" not in err
    if status == EXIT_OK:
        assert len(out.splitlines()) < MAX_ROWS + 20


# ------------------------------------------------------------------- huge integers


HUGE = "1" * 5000
SIZES = [HUGE, "-" + HUGE, "9" * 4301, "1" * 1001]
# every integer-taking option, with {} where the integer goes
INT_OPTIONS = [
    ["layout", "(2,2):(1,2)", "--limit", "{}"],
    ["layout", "(2,2):(1,2)", "--bank", "{}"],
    ["layout", "(2,2):(1,2)", "--tv", "2,{}"],
    ["layout", "(M,2):(1,2)", "--set", "M={}"],
    ["layout", "(M,2):(1,2)", "--multiple-of", "M={}"],
    ["layout", "({},2):(1,2)"],
    ["layout", "(2,2):(1,{})"],
    ["prove", "injective", "(M,2):(1,M)", "--assume", "M >= {}"],
    ["prove", "contiguous", "(M,2):(1,M)", "--vector", "{}"],
    ["prove", "contiguous", "(M,2):(1,M)", "--vector", "2", "--mode", "{}"],
    ["prove", "aligned", "(M,2):(1,M)", "--vector", "2", "--elem-bytes", "{}"],
    ["prove", "aligned", "(M,2):(1,M)", "--vector", "2", "--elem-bytes", "2", "--align", "{}"],
    ["prove", "bounded", "(M,2):(1,M)", "--extent={}*M"],
    ["prove", "bounded", "(M,2):(1,M)", "--extent", "4*M", "--base", "{}"],
    ["prove", "injective", "(M,2):(1,M)", "--multiple-of", "M={}"],
]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("template", INT_OPTIONS, ids=lambda t: " ".join(t[:3] + t[3:4]))
def test_integers_past_the_conversion_limit_are_usage_errors(capsys, template, size) -> None:
    args = [a.replace("{}", size) for a in template]
    status, out, err = run(capsys, *args)
    assert one_line_usage(status, out, err), err[-500:]
    assert len(err) < 1000  # the value is shortened in the message


def test_the_command_line_integer_regression_in_a_subprocess() -> None:
    """As the issue ran it: a traceback (exit 1) before the fix."""
    r = subprocess.run(
        [sys.executable, "-m", "tylo.cli", "layout", "(M,2):(1,2)", "--set", f"M={HUGE}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert r.returncode == EXIT_USAGE and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1 and "more than 1000 digits" in r.stderr


# ------------------------------------------------------------- names the layout lacks

NAMES = st.sampled_from(["M", "K", "lda", "N", "ldb", "Q", "x1"])


@SETTINGS
@given(set_names=st.lists(NAMES, min_size=1, max_size=3, unique=True))
def test_set_of_a_name_the_layout_lacks_is_refused(capsys, set_names) -> None:
    """The layout's symbols are found by a regex over the notation (independent of the
    parser); a --set of any other name is a usage error naming it, else it is applied."""
    notation = "(M,K):(1,lda)"
    have = set(re.findall(r"[A-Za-z_]\w*", notation))
    args = [a for n in set_names for a in ("--set", f"{n}=4")]
    status, out, err = run(capsys, "layout", notation, *args, "--limit", "2")
    unknown = [n for n in set_names if n not in have]
    if unknown:
        assert one_line_usage(status, out, err) and f"no symbol {unknown[0]}" in err, err
    else:
        assert status == EXIT_OK and out.splitlines()[0].startswith("layout  ")
        for n in set_names:
            assert n not in out.splitlines()[0]  # substituted


@SETTINGS
@given(
    left=st.one_of(NAMES, st.integers(0, 9).map(str)),
    op=st.sampled_from([">=", ">", "<=", "<", "=="]),
    right=NAMES,
    divisibility=st.booleans(),
)
def test_assume_of_a_name_the_layout_lacks_is_refused(capsys, left, op, right, divisibility):
    notation = "(M,K):(1,lda)"
    have = set(re.findall(r"[A-Za-z_]\w*", notation))
    fact = f"8 | {right}" if divisibility else f"{left} {op} {right}"
    used = set(re.findall(r"[A-Za-z_]\w*", fact))
    status, out, err = run(capsys, "prove", "injective", notation, "--assume", fact)
    if used - have:
        assert one_line_usage(status, out, err), err
        assert min(used - have) in err and "not a symbol" in err
    else:
        assert status != EXIT_USAGE or "--assume" in err and "false" in err, err


def test_the_set_and_svg_regressions(capsys, tmp_path) -> None:
    status, out, err = run(capsys, "layout", "(2,2):(1,2)", "--set", "Q=3")
    assert one_line_usage(status, out, err) and "has no symbol Q" in err
    for option in ("--svg", "--png"):
        for name in ("", " ", "\t"):
            status, out, err = run(capsys, "layout", "(2,2):(1,2)", option, name)
            assert one_line_usage(status, out, err) and "give a file name" in err
            assert out == ""


# -------------------------------------------------------------- unknown past the budget


def test_the_budget_example_is_unknown(capsys) -> None:
    """Injective (offsets s + 6k with distinct residues of s mod 6), settled by no rule,
    6 * 2**20 elements: past the budget, so unknown (exit 3), where it exited 64."""
    status, out, err = run(capsys, "prove", "injective", "(3,2,1048576):(2,3,6)")
    assert status == EXIT_UNKNOWN and err == ""
    assert out.splitlines()[0] == "injective: unknown" and "size budget" in out
    status, out, _ = run(capsys, "prove", "injective", "(3,2,1024):(2,3,6)")
    assert status == EXIT_OK  # the same structure within the budget: enumerated, proved


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    extents=st.lists(st.integers(2, 4096), min_size=2, max_size=4),
    strides=st.lists(st.integers(-7, 4099), min_size=4, max_size=4),
    prop=st.sampled_from(["injective", "contiguous", "bounded", "equal"]),
)
def test_large_static_layouts_end_in_a_verdict(capsys, extents, strides, prop) -> None:
    """Static layouts of up to 2**48 elements: every property ends in a verdict whose
    exit status matches its first line (0 proved, 1 disproved, 3 unknown), never a usage
    error or a traceback."""
    lay = f"({','.join(map(str, extents))}):({','.join(map(str, strides[: len(extents)]))})"
    extra = {
        "injective": [],
        "contiguous": ["--vector", "2"],
        "bounded": ["--extent", "100000"],
        "equal": [
            f"({','.join(map(str, reversed(extents)))}):(1,{','.join(['0'] * (len(extents) - 1))})"
        ],
    }[prop]
    status, out, err = run(capsys, "prove", prop, lay, *extra)
    want = {EXIT_OK: "proved", EXIT_FAILED: "disproved", EXIT_UNKNOWN: "unknown"}
    assert status in want and err == "", err
    assert out.splitlines()[0] == f"{prop}: {want[status]}"
