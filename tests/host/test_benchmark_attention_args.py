"""``benchmarks/attention.py``'s command line, checked without a GPU: the filters refuse
what they cannot use before anything is timed, and ``_sleep_cycles`` asks for no sleep at
zero. The timing itself runs on the H200 only (it needs torch and CUDA)."""

from __future__ import annotations

import re

import pytest

from benchmarks import attention as bench


@pytest.mark.parametrize("bad", ["(", "[a-", "*x", "(?P<"])
def test_only_must_be_a_regular_expression(bad, capsys):
    try:
        re.compile(bad)
    except re.error:
        pass
    else:  # the claim below is only for strings re refuses
        pytest.fail(f"{bad!r} compiles")
    with pytest.raises(SystemExit) as err:
        bench.main(["--variants", "--only", bad])
    assert err.value.code == 2
    assert "--only: not a regular expression" in capsys.readouterr().err


@pytest.mark.parametrize("flag, bad", [("--causal", "maybe"), ("--d", "96"),
                                       ("--lead-us", "soon"), ("--lengths", "1k"),
                                       ("--lengths", "1024,,4096"), ("--lengths", "2048"),
                                       ("--lengths", "1024,-1")])  # fmt: skip
def test_filters_refuse_values_they_do_not_know(flag, bad, capsys):
    with pytest.raises(SystemExit) as err:
        bench.main([flag, bad])
    assert err.value.code == 2
    assert flag in capsys.readouterr().err


def test_no_sleep_at_zero_or_below():
    """No GPU sleep asked for: 0 cycles, without touching torch or CUDA."""
    assert bench._sleep_cycles(0) == 0
    assert bench._sleep_cycles(-5.0) == 0


def test_only_selects_variants_by_name():
    """The names ``--only`` is matched against are the variant tables' keys: the pattern
    the D = 128 runs used picks the split-release and wide entries and nothing else."""
    pattern = r"^(wide|split release|persistent split release|one-item)"
    picked = {n for n in bench.HOPPER_VARIANTS if re.search(pattern, n)}
    assert "split release" in picked and "wide split release persistent" in picked
    assert "one-item" in picked and "persistent" not in picked and "plain" not in picked
    assert all(n.startswith(("wide", "split", "persistent split", "one-item")) for n in picked)


def test_no_sleep_without_torch_sleep(monkeypatch, capsys):
    """A torch without the private ``torch.cuda._sleep``: no sleep (0 cycles) and a note
    on stderr, not a crash."""
    import sys
    import types

    cuda = types.SimpleNamespace()  # no _sleep
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    assert bench._sleep_cycles(1000.0) == 0
    assert "no torch.cuda._sleep" in capsys.readouterr().err
