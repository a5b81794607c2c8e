"""``tylo layout`` and ``tylo prove``: printed facts checked against tylo.layouts, the
offset table against a brute-force dot product over random layouts, and every exit status
(0 proved, 1 disproved, 2 usage, 3 unknown, 69 missing PNG support) in a subprocess run of
``python -m tylo.cli`` exactly as a user runs it."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given, settings

from tylo.cli import EXIT_FAILED, EXIT_OK, EXIT_UNAVAILABLE, EXIT_UNKNOWN, EXIT_USAGE, main
from tylo.layouts import cosize, flatten, parse, prove_injective, rank, size
from tylo.layouts.strategies import layouts

ROOT = Path(__file__).resolve().parents[2]
NS = "{http://www.w3.org/2000/svg}"


def cli(
    *args: str, env: dict[str, str] | None = None, pre: str = ""
) -> subprocess.CompletedProcess:
    """Run ``python -m tylo.cli ARGS`` (``pre``: Python run first, e.g. to hide a module)."""
    cmd = [sys.executable, "-m", "tylo.cli", *args]
    if pre:
        cmd = [
            sys.executable,
            "-c",
            (
                f"{pre}; import sys, runpy; sys.argv = ['tylo', *sys.argv[1:]]; "
                "runpy.run_module('tylo.cli', run_name='__main__')"
            ),
            *args,
        ]
    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(
        cmd, check=False, capture_output=True, text=True, env=full, cwd=ROOT, timeout=120
    )


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def facts(out: str) -> dict[str, str]:
    return dict(line.split(None, 1) for line in out.splitlines()[:5])


def table(out: str) -> list[list[str]]:
    lines = out.splitlines()
    start = lines.index("") + 2  # the blank line, then the header
    return [ln.split() for ln in lines[start:] if not ln.startswith("...")]


def dot(layout: object, index: int) -> int:
    fs, fd = flatten(layout).flat()
    off = 0
    for s, d in zip(fs, fd):
        off += (index % s) * d
        index //= s
    return off


# ----------------------------------------------------------------------- subprocess runs


def test_layout_subprocess_prints_the_table(tmp_path: Path) -> None:
    svg = tmp_path / "l.svg"
    r = cli("layout", "((2,4),8):((1,16),2)", "--svg", str(svg))
    assert r.returncode == EXIT_OK, r.stderr
    lay = parse("((2,4),8):((1,16),2)")
    assert facts(r.stdout) == {
        "layout": str(lay),
        "size": "64",
        "cosize": str(cosize(lay)),
        "rank": "2",
        "depth": "2",
    }
    rows = table(r.stdout.split("\nwrote")[0])
    assert [int(row[2]) for row in rows] == [dot(lay, i) for i in range(64)]
    cells = [g for g in ET.parse(svg).getroot().iter(f"{NS}g") if g.get("class") == "cell"]
    assert len(cells) == 64


@pytest.mark.parametrize(
    ("args", "status", "first"),
    [
        (["injective", "(M,K):(1,lda)", "--assume", "lda >= M"], EXIT_OK, "injective: proved"),
        (["injective", "(M,K):(1,lda)"], EXIT_FAILED, "injective: disproved"),
        (["injective", "(K,3):(lda,3)", "--assume", "4 | lda"], EXIT_UNKNOWN, "injective: unknown"),
    ],
)
def test_prove_subprocess_exit_status(args: list[str], status: int, first: str) -> None:
    r = cli("prove", *args)
    assert r.returncode == status, r.stderr
    assert r.stdout.splitlines()[0] == first and r.stderr == ""


def test_usage_errors_exit_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    r = cli("prove")
    assert r.returncode == EXIT_USAGE and r.stdout == ""
    assert r.stderr.splitlines()[-1] == (
        "tylo prove: error: the following arguments are required: PROPERTY, LAYOUT"
    )
    status, out, err = run(capsys, "layout", "(2,")
    assert status == EXIT_USAGE and out == ""
    assert err.splitlines() == [
        (
            "tylo layout: error: LAYOUT '(2,': Layout.parse: unexpected end of text at column 3 "
            "of '(2,'; expected CuTe notation such as '((2,2),8):((1,16),2)'"
        )
    ]


def test_png_without_cairosvg_names_what_to_install(tmp_path: Path) -> None:
    png = tmp_path / "l.png"
    r = cli(
        "layout", "(4,4):(4,1)", "--png", str(png), pre="import sys; sys.modules['cairosvg'] = None"
    )
    assert r.returncode == EXIT_UNAVAILABLE, r.stderr
    assert "pip install cairosvg" in r.stderr and not png.exists()


# ----------------------------------------------------------------------- in-process runs


@settings(max_examples=25, deadline=None)
@given(layouts(max_size=32))
def test_layout_table_is_the_layout(lay: object) -> None:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        status = main(["layout", str(lay), "--limit", "0"])
    out = buf.getvalue()
    assert status == EXIT_OK
    assert facts(out)["size"] == str(size(lay)) and facts(out)["cosize"] == str(cosize(lay))
    assert [int(r[2]) for r in table(out)] == [dot(lay, i) for i in range(size(lay))]


def test_layout_table_matches_dot_products(capsys: pytest.CaptureFixture[str]) -> None:
    # in-process, on a fixed family: every stride pattern of a rank-3 layout of size 24
    for text in (
        "(2,3,4):(1,2,6)",
        "(2,3,4):(12,4,1)",
        "((2,3),4):((0,7),1)",
        "(4,(3,2)):(-1,(4,0))",
    ):
        status, out, _ = run(capsys, "layout", text, "--limit", "0")
        lay = parse(text)
        assert status == EXIT_OK
        assert facts(out)["size"] == str(size(lay)) and facts(out)["rank"] == str(rank(lay))
        assert [int(r[2]) for r in table(out)] == [dot(lay, i) for i in range(size(lay))]


def test_layout_symbols_facts_and_values(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "layout", "(M,K):(1,lda)", "--multiple-of", "M=8")
    assert status == EXIT_OK
    assert "size    K*M" in out and "symbols K, M, lda" in out
    assert "needs values for K, M (the shape): --set K=... --set M=..." in out
    status, out, _ = run(capsys, "layout", "(4,K):(1,lda)", "--set", "K=2")
    assert status == EXIT_OK and "lda + 3" in out  # a static shape prints symbolic offsets
    status, out, _ = run(
        capsys,
        "layout",
        "(M,K):(1,lda)",
        "--set",
        "M=3",
        "--set",
        "K=2",
        "--set",
        "lda=5",
        "--limit",
        "0",
    )
    assert [int(r[2]) for r in table(out)] == [0, 1, 2, 5, 6, 7]
    for bad, says in (
        (["--multiple-of", "M=8", "--set", "M=12"], "multiple of 8"),
        (["--set", "M=0"], "positive"),
        (["--set", "M=x"], "expected an integer"),
        (["--set", "=3"], "NAME=INTEGER"),
        (["--multiple-of", "M=0"], "K must be >= 1"),
        (["--dim", "1M"], "Python identifier"),
        (["--svg", "/tmp/never.svg"], "needs a static layout"),
    ):
        status, _, err = run(capsys, "layout", "(M,K):(1,lda)", *bad)
        assert status == EXIT_USAGE and says in err, (bad, err)


def test_layout_bank_and_tv(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    svg = tmp_path / "b.svg"
    status, out, _ = run(
        capsys,
        "layout",
        "S<3,3,3> o (8,64):(64,1)",
        "--bank",
        "2",
        "--limit",
        "0",
        "--svg",
        str(svg),
    )
    lay = parse("S<3,3,3> o (8,64):(64,1)")
    assert status == EXIT_OK
    rows = table(out.split("\nwrote")[0])
    assert [(int(r[2]), int(r[3])) for r in rows] == [
        (lay(i), (lay(i) * 2 // 4) % 32) for i in range(512)
    ]
    banks = [
        g.get("data-bank") for g in ET.parse(svg).getroot().iter(f"{NS}g") if g.get("data-bank")
    ]
    assert len(banks) == 512
    status, out, _ = run(
        capsys, "layout", "((4,8),(2,2)):((32,1),(16,8))", "--tv", "16,8", "--limit", "0"
    )
    held = {int(r[0]): r[2] for r in table(out)}
    # PTX ISA mma.m16n8k16 C fragment: row groupID (+8 for c2,c3), col 2*threadID_in_group + i%2
    want = {
        (lane // 4 + 8 * (v >> 1)) + 16 * (2 * (lane % 4) + (v & 1)): f"T{lane}V{v}"
        for lane in range(32)
        for v in range(4)
    }
    assert status == EXIT_OK and held == want
    for bad in (["--bank", "0"], ["--tv", "a,b"], ["--tv", "0,4"]):
        status, _, err = run(capsys, "layout", "(4,4):(4,1)", *bad)
        assert status == EXIT_USAGE, (bad, err)
    status, _, err = run(capsys, "layout", "S<3,3,3>")
    assert status == EXIT_USAGE and "bare swizzle" in err


def test_prove_every_property(capsys: pytest.CaptureFixture[str]) -> None:
    cases = [
        (
            [
                "contiguous",
                "(M,K):(1,lda)",
                "--vector",
                "8",
                "--multiple-of",
                "M=8",
                "--assume",
                "lda >= M",
            ],
            EXIT_OK,
        ),
        (["contiguous", "(M,K):(1,lda)", "--vector", "8", "--assume", "lda >= M"], EXIT_FAILED),
        (
            [
                "aligned",
                "(M,K):(1,lda)",
                "--vector",
                "8",
                "--elem-bytes",
                "2",
                "--assume",
                "8 | M",
                "--assume",
                "divisible(lda, 8)",
            ],
            EXIT_OK,
        ),
        (["bounded", "(M,K):(1,lda)", "--extent", "lda*(K-1)+M", "--assume", "lda >= M"], EXIT_OK),
        (["bounded", "(M,K):(1,lda)", "--extent", "M*K", "--assume", "lda >= M"], EXIT_FAILED),
        (["equal", "(M,N):(1,M)", "M*N:1"], EXIT_OK),
        (["equal", "(M,N):(1,lda)", "M*N:1", "--assume", "lda == M"], EXIT_OK),
        (["equal", "(M,N):(1,lda)", "M*N:1"], EXIT_FAILED),
        (["injective", "S<3,3,3> o (8,64):(64,1)"], EXIT_OK),
        (["injective", "(4,4):(1,2)"], EXIT_FAILED),
    ]
    for args, want in cases:
        status, out, err = run(capsys, "prove", *args)
        assert status == want, (args, out, err)
        assert out.startswith(f"{args[0]}: {('proved', 'disproved', 'unknown')[want]}")
        if want == EXIT_FAILED:
            assert "counterexample:" in out


def test_prove_counterexample_is_replayed_by_brute_force(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, _ = run(capsys, "prove", "injective", "(M,K):(1,lda)")
    values = dict(
        kv.split("=")
        for kv in next(ln for ln in out.splitlines() if ln.startswith("counterexample:"))
        .split(": ", 1)[1]
        .split(", ")
    )
    m, k, lda = int(values["M"]), int(values["K"]), int(values["lda"])
    offsets = [i + lda * j for j in range(k) for i in range(m)]
    assert status == EXIT_FAILED and len(set(offsets)) < len(offsets)
    v = prove_injective(parse("(M,K):(1,lda)"))
    assert f"guard: {v.guard}" in out


def test_prove_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    for args, says in (
        (["contiguous", "(4,4):(1,4)"], "--vector is required"),
        (["aligned", "(4,4):(1,4)", "--vector", "4"], "--elem-bytes is required"),
        (["bounded", "(4,4):(1,4)"], "--extent is required"),
        (["equal", "(4,4):(1,4)"], "takes two layouts"),
        (["injective", "(4,4):(1,4)", "(4,4):(1,4)"], "takes one layout"),
        (["injective", "(M,4):(1,M)", "--assume", "M ~ 3"], "expected a relation"),
        (["injective", "(M,4):(1,M)", "--assume", "3 >= 4"], "is false"),
        (["injective", "(M,4):(1,M)", "--assume", "M >= (2"], "--assume"),
        (["contiguous", "(4,4):(1,4)", "--vector", "0"], "must be >= 1"),
        (["contiguous", "(4,4):(1,4)", "--vector", "x"], "expected an integer"),
        (["contiguous", "(4,4):(1,4)", "--vector", "2", "--mode", "-1"], "must be >= 0"),
    ):
        status, _, err = run(capsys, "prove", *args)
        assert status == EXIT_USAGE, (args, err)
        assert says in err and err.count("\n") == 1, (args, err)
    # a trivially true assumption is accepted (and adds nothing)
    status, _, _ = run(capsys, "prove", "injective", "(4,4):(1,4)", "--assume", "4 >= 3")
    assert status == EXIT_OK


def test_help_has_examples(capsys: pytest.CaptureFixture[str]) -> None:
    for sub in ("layout", "prove", "compile", "cache", "doctor"):
        with pytest.raises(SystemExit) as exc:
            main([sub, "--help"])
        assert exc.value.code == 0
        assert "examples:" in capsys.readouterr().out, sub
    assert main([]) == EXIT_USAGE
    assert "usage: tylo" in capsys.readouterr().err


def test_layout_hostile_values(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    big = 2**63 - 1
    status, out, _ = run(capsys, "layout", f"(2,2):(1,{big})", "--bank", "8", "--limit", "0")
    rows = table(out)
    assert status == EXIT_OK
    assert [(int(r[2]), int(r[3])) for r in rows] == [
        (o, (o * 8 // 4) % 32) for o in (0, 1, big, big + 1)
    ]
    status, out, _ = run(capsys, "layout", "(4):(-1)", "--limit", "0")
    assert status == EXIT_OK and [int(r[2]) for r in table(out)] == [0, -1, -2, -3]
    status, _, err = run(capsys, "layout", "(200,200):(1,200)", "--svg", str(tmp_path / "x.svg"))
    assert status == EXIT_USAGE and "more than the 16384" in err
    assert not (tmp_path / "x.svg").exists()
    status, _, err = run(capsys, "layout", "(2,2):(1,2)", "--svg", str(tmp_path / "no" / "x.svg"))
    assert status == EXIT_FAILED and "cannot write" in err
