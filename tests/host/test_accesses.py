"""Access facts (tylo.kernel.accesses): each access proved, guarded or unproved; the
launch check (kernel.check_launch, tylo.ArraySpec) refuses what would leave an array,
before any driver call, with the parameter, the source line, the condition and the values.

No GPU: kernels are traced (not compiled), and launches are checked with ArraySpecs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tylo
from tylo.kernel.bounds_check import BoundsGuard, extent_of
from tylo.kernel.guardexpr import GuardDataError
from tylo.kernel.guards import Guard

S = tylo.ArraySpec


@tylo.kernel
def vadd(a, b, c, n: tylo.Int(min=0)):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        c[i] = a[i] + b[i]


@tylo.kernel
def vadd_unmasked(a, c):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    c[i] = a[i]


@tylo.kernel
def gather(out, x, idx, n: tylo.Int):
    i = tylo.thread_idx.x
    if i < n:
        out[i] = x[tylo.value(idx[i], tylo.i32)]


@tylo.kernel
def staged(out):
    s = tylo.shared(tylo.f32, 128)
    t = tylo.thread_idx.x
    s[t] = 1.0
    tylo.sync_threads()
    out[t] = s[127 - t]


@tylo.kernel
def with_local(out, n: tylo.Int):
    acc = tylo.local(tylo.f32, 4, fill=0.0)
    t = tylo.thread_idx.x
    for k in tylo.range(4):
        acc[k] = 1.0
    if t < n:
        out[t] = acc[t % 4]


def _vadd_specs():
    return (tylo.f32, tylo.f32, tylo.f32, int)


# ---------------------------------------------------------------------------- states


def test_vector_add_is_guarded_on_each_array():
    report = vadd.accesses(*_vadd_specs(), block=256)
    assert [(a.array, a.kind, a.state) for a in report.accesses] == [
        ("a", "load", "guarded"),
        ("b", "load", "guarded"),
        ("c", "store", "guarded"),
    ]
    assert all("len(" in a.guard and "n - 1" in a.guard for a in report.accesses)
    assert report.summary() == "accesses: 0 proved, 3 guarded, 0 unproved"
    assert report.accesses[0].file == "test_accesses.py"
    assert report.accesses[0].line == vadd.fn.__code__.co_firstlineno + 4


def test_shared_and_local_accesses_within_their_sizes_are_proved():
    report = staged.accesses(tylo.f32, block=128)
    shared = [a for a in report.accesses if a.space == "shared"]
    assert len(shared) == 2 and all(a.state == "proved" for a in shared)
    report = with_local.accesses(tylo.f32, int, block=64)
    local = [a for a in report.accesses if a.space == "local"]
    assert local and all(a.state == "proved" for a in local)


def test_a_gather_through_loaded_values_is_unproved_with_its_reason():
    report = gather.accesses(tylo.f32, tylo.f32, tylo.i32, int, block=64)
    x = [a for a in report.accesses if a.array == "x"]
    assert len(x) == 1 and x[0].state == "unproved"
    assert "no launch argument determines" in x[0].reason
    assert report.count("unproved") == 1


def test_an_offset_before_the_start_for_thread_zero_is_refused_while_tracing():
    @tylo.kernel
    def shifted(y, x):
        i = tylo.thread_idx.x
        y[i] = x[i - 1]

    with pytest.raises(tylo.OutOfBoundsError, match=r"x\[tid_x - 1\].*reaches -1"):
        shifted.accesses(tylo.f32, tylo.f32, block=32)


def test_a_shared_buffer_one_element_short_is_refused_while_tracing():
    @tylo.kernel
    def reversed_(out):
        s = tylo.shared(tylo.f32, 127)
        t = tylo.thread_idx.x
        if t < 127:
            s[t] = 1.0
        tylo.sync_threads()
        out[t] = s[127 - t]

    with pytest.raises(tylo.OutOfBoundsError, match=r"reaches 127, past the 127 elements"):
        reversed_.accesses(tylo.f32, block=128)


# ---------------------------------------------------------------------------- policy


def test_prove_refuses_guarded_accesses_and_lists_them():
    strict = tylo.kernel(bounds="prove")(vadd.fn)
    with pytest.raises(tylo.BoundsProofError, match=r"3 of 3 accesses are not proved") as info:
        strict.accesses(*_vadd_specs(), block=256)
    assert "c[256*bid_x + tid_x]" in str(info.value)


def test_prove_accepts_a_kernel_whose_accesses_are_all_proved():
    @tylo.kernel(bounds="prove")
    def only_shared():
        s = tylo.shared(tylo.f32, 64)
        s[tylo.thread_idx.x] = 0.0

    report = only_shared.accesses(block=64)
    assert report.summary() == "accesses: 1 proved, 0 guarded, 0 unproved"


def test_off_records_nothing():
    loose = tylo.kernel(bounds="off")(vadd.fn)
    assert loose.accesses(*_vadd_specs(), block=256).accesses == ()
    loose.check_launch(4, 256, S(1, tylo.f32), S(1, tylo.f32), S(1, tylo.f32), 1000)


@pytest.mark.parametrize("policy", ["Guard", "", None, True, 1, "prove "])
def test_an_unknown_policy_is_refused(policy):
    with pytest.raises(tylo.TraceError, match="bounds="):
        tylo.kernel(bounds=policy)(vadd.fn)


# ---------------------------------------------------------------------------- launch


def test_check_launch_accepts_exact_sizes_and_refuses_one_short():
    vadd.check_launch(4, 256, S(1000, tylo.f32), S(1000, tylo.f32), S(1000, tylo.f32), 1000)
    with pytest.raises(tylo.OutOfBoundsLaunchError) as info:
        vadd.check_launch(4, 256, S(1000, tylo.f32), S(1000, tylo.f32), S(999, tylo.f32), 1000)
    msg = str(info.value)
    assert "argument 'c'" in msg and "test_accesses.py:" in msg
    assert "len(c) = 999" in msg and "n = 1000" in msg and "grid_dim_x = 4" in msg
    assert isinstance(info.value, tylo.KernelArgumentError)


def test_the_guard_follows_the_grid_when_it_covers_less_than_n():
    # 2 blocks of 256 threads write c[0..511] whatever n is
    vadd.check_launch(2, 256, S(512, tylo.f32), S(512, tylo.f32), S(512, tylo.f32), 10**6)
    with pytest.raises(tylo.OutOfBoundsLaunchError, match="len"):
        vadd.check_launch(2, 256, S(511, tylo.f32), S(512, tylo.f32), S(512, tylo.f32), 10**6)


def test_an_unmasked_kernel_needs_the_whole_grid():
    vadd_unmasked.check_launch(3, 128, S(384, tylo.f32), S(384, tylo.f32))
    with pytest.raises(tylo.OutOfBoundsLaunchError, match="argument 'a'"):
        vadd_unmasked.check_launch(3, 128, S(383, tylo.f32), S(384, tylo.f32))


def test_check_launch_raises_the_launch_argument_errors_first():
    with pytest.raises(tylo.KernelArgumentError, match="Python int"):
        vadd.check_launch(1, 32, S(8, tylo.f32), S(8, tylo.f32), S(8, tylo.f32), "8")
    with pytest.raises(tylo.KernelArgumentError):
        vadd.check_launch(1, 32, S(8, tylo.f32), S(8, tylo.f32), S(8, tylo.f32), -1)


@pytest.mark.parametrize("n", [0, 1, 31, 32, 33, 2**31 + 5])
def test_the_verdict_matches_brute_force_over_n(n):
    """vector_add on one block of 32: threads i < min(32, n) write c[i]: in bounds exactly
    when len(c) >= min(32, n)."""
    need = min(32, n)
    for length in {0, max(need - 1, 0), need, need + 1}:
        args = (S(64, tylo.f32), S(64, tylo.f32), S(length, tylo.f32), n)
        if length >= need:
            vadd.check_launch(1, 32, *args)
        else:
            with pytest.raises(tylo.OutOfBoundsLaunchError):
                vadd.check_launch(1, 32, *args)


# ---------------------------------------------------------------------------- data


def test_extent_of_counts_elements_to_the_last_one():
    assert extent_of(S(10, tylo.f32), 4) == 10
    assert extent_of(S(10, tylo.f32), 2) == 20  # in the parameter's element size
    assert extent_of(S((4, 5), tylo.f32, (10, 1)), 4) == 35  # 3 * 10 + 4 + 1
    assert extent_of(S((4, 0), tylo.f32), 4) == 0
    assert extent_of(S(0, tylo.bf16), 2) == 0


def test_bounds_guards_round_trip_as_data_and_refuse_damage():
    (guard, *_) = vadd.trace(*_vadd_specs(), block=256).bounds
    assert BoundsGuard.from_data(guard.to_data()) == guard
    data = guard.to_data()
    for bad in ([], data[:4], [data[0], 1, *data[2:]], [*data[:4], [["n", "x"]]]):
        with pytest.raises(GuardDataError):
            BoundsGuard.from_data(bad)
    damaged = [["text", ["__import__", "os"]], *data[1:]]
    with pytest.raises(GuardDataError):
        BoundsGuard.from_data(damaged)


def test_the_ops_compile_only_line_sums_the_kernels_and_names_unknown_ones():
    from types import SimpleNamespace

    from tylo.ops.cli import access_summary

    kernels = {
        "a": SimpleNamespace(access_counts=(1, 2, 3)),
        "b": SimpleNamespace(access_counts=(10, 0, 1)),
        "c": SimpleNamespace(access_counts=None),
    }
    assert access_summary(kernels) == "accesses: 11 proved, 2 guarded, 4 unproved (not known for c)"
    assert access_summary({}) == "accesses: 0 proved, 0 guarded, 0 unproved"


def test_a_compiled_specialization_carries_its_counts():
    compiled = vadd.compile(*_vadd_specs(), block=256)
    assert compiled.access_counts == (0, 3, 0)


def test_tylo_compile_accesses_prints_the_report(tmp_path, capsys, monkeypatch):
    from tylo.cli import main

    monkeypatch.setenv("TYLO_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "k.py"
    src.write_text(
        "import tylo\n\n\n@tylo.kernel\ndef k(a, n: tylo.Int):\n"
        "    i = tylo.thread_idx.x\n    if i < n:\n        a[i] = 1.0\n"
    )
    status = main(
        [
            "compile",
            f"{src}:k",
            "--arg",
            "a=ptr:f32",
            "--arg",
            "n=int",
            "--block",
            "64",
            "--accesses",
        ]
    )
    out = capsys.readouterr().out
    assert status == 0
    assert "k.py:8  guarded   global store a[tid_x]" in out
    assert out.strip().endswith("accesses: 0 proved, 1 guarded, 0 unproved")


@pytest.mark.parametrize("state", ["Proved", "", None, 1, "all"])
def test_a_report_refuses_an_unknown_state(state):
    report = vadd.accesses(*_vadd_specs(), block=256)
    with pytest.raises(tylo.TyloError, match="proved, guarded or unproved"):
        report.count(state)


@tylo.kernel
def with_assumption(out, n: tylo.Int(min=0), m: tylo.Int(min=0)):
    tylo.assume(n <= m)
    i = tylo.thread_idx.x
    if i < n:
        out[i] = 1.0


def test_the_report_lists_what_the_kernel_assumes():
    report = with_assumption.accesses(tylo.f32, int, int, block=64)
    assert report.assumed == ("n <= m",)
    assert "assumed (checked at every launch): n <= m" in str(report)
    with pytest.raises(tylo.KernelArgumentError, match="n <= m"):  # and the launch checks it
        with_assumption.check_launch(1, 64, S(64, tylo.f32), 5, 4)
    with_assumption.check_launch(1, 64, S(64, tylo.f32), 4, 5)


def test_an_offset_tylo_cannot_bound_is_unproved_not_a_failed_trace(monkeypatch):
    from tylo.kernel import access_bounds

    def broken(*args, **kwargs):
        raise ZeroDivisionError("planted")

    monkeypatch.setattr(access_bounds, "offset_range", broken)
    report = vadd.accesses(*_vadd_specs(), block=256)
    assert report.count("unproved") == 3
    assert "could not bound the offset (ZeroDivisionError: planted)" in report.accesses[0].reason


def test_a_race_check_that_cannot_evaluate_is_not_proved(monkeypatch):
    from tylo.kernel import races

    def broken(*args):
        raise NameError("planted")

    monkeypatch.setattr(races, "_first_race", broken)
    report = staged.accesses(tylo.f32, block=128)
    assert report.races and all(r.state == "not proved" for r in report.races)
    assert "could not be evaluated (NameError)" in report.races[0].reason


@pytest.mark.parametrize("n", [1, 255, 256, 257, 1000, 2**20 + 3])
def test_the_vector_add_example_refuses_a_short_c_before_any_driver(n, monkeypatch):
    """examples/vector_add's own launch: with c one element short it is refused by the
    checks a launch makes before the driver (kernel.check_launch runs them here, with the
    grid the example computes); with c exactly n long it is accepted."""
    from examples.vector_add import kernel as example

    grid = (n + example.BLOCK - 1) // example.BLOCK
    full, short = S(n, tylo.f32), S(n - 1, tylo.f32)
    example.vector_add.check_launch(grid, example.BLOCK, full, S(n, tylo.f32), S(n, tylo.f32), n)
    with pytest.raises(tylo.OutOfBoundsLaunchError, match=rf"argument 'c'.*len\(c\) = {n - 1}"):
        example.vector_add.check_launch(
            grid, example.BLOCK, short, S(n, tylo.f32), S(n, tylo.f32), n
        )


@settings(max_examples=200, deadline=None)
@given(
    w=st.lists(st.integers(-(2**40), 2**40), min_size=9, max_size=9),
    picks=st.lists(st.integers(0, 4), min_size=1, max_size=6),
)
def test_the_grouped_bounds_check_agrees_with_the_guards_one_by_one(w, picks):
    """all_within (left sides shared, compared with each extent) against compile_guards
    (each guard on its own), on guard trees of the shapes bounds guards take, random
    launch vectors included (negative, huge, zero divisors)."""
    from tylo.kernel.bounds_check import all_within
    from tylo.kernel.guards import compile_guards

    lhs = ("+", ("min", ("*", 256, ("v", 6)), ("-", ("v", 2), 1)), 1)
    trees = [
        ("<=", lhs, ("v", 3)),
        ("<=", lhs, ("v", 4)),
        ("<=", ("+", ("//", ("v", 2), ("v", 1)), 4), ("v", 5)),  # a divisor that may be 0
        ("and", (">=", ("-", ("v", 2), 3), 0), ("<=", ("v", 2), ("v", 3))),
        ("<=", 7, ("v", 8)),  # a constant left side, a slot past the extents
    ]
    chosen = [trees[i] for i in picks]
    guards = [Guard("t", t) for t in chosen]
    assert all_within(chosen, 3)(w) == compile_guards(guards)(w)
