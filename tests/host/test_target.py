"""Target parsing, naming, specs, and the test-tier banner helpers (no CUDA needed)."""

from __future__ import annotations

import pytest

from tylo.errors import TyloError
from tylo.target import Target, TargetError, parse_spec
from tylo.testing import read_banner


@pytest.mark.parametrize(
    ("text", "major", "minor", "arch", "sm", "compute"),
    [
        ("sm_90a", 9, 0, True, "sm_90a", "compute_90a"),
        ("sm_80", 8, 0, False, "sm_80", "compute_80"),
        ("sm_89", 8, 9, False, "sm_89", "compute_89"),
        ("sm_90", 9, 0, False, "sm_90", "compute_90"),
        ("sm_100a", 10, 0, True, "sm_100a", "compute_100a"),
        ("sm_120", 12, 0, False, "sm_120", "compute_120"),
        ("compute_90a", 9, 0, True, "sm_90a", "compute_90a"),
        ("90a", 9, 0, True, "sm_90a", "compute_90a"),
        ("8.6", 8, 6, False, "sm_86", "compute_86"),
        (" SM_90A ", 9, 0, True, "sm_90a", "compute_90a"),
    ],
)
def test_parse_forms(text: str, major: int, minor: int, arch: bool, sm: str, compute: str) -> None:
    t = Target.parse(text)
    assert (t.major, t.minor, t.arch_specific) == (major, minor, arch)
    assert (t.sm, t.compute, str(t), t.cc) == (sm, compute, sm, (major, minor))
    assert Target.parse(t) is t
    assert Target.parse(t.sm) == t


def test_targets_are_hashable_keys() -> None:
    keys = {Target.parse("sm_90a"): 1, Target.parse("sm_90"): 2, Target(9, 0, True): 3}
    assert keys == {Target(9, 0, True): 3, Target(9, 0, False): 2}
    with pytest.raises(AttributeError):
        Target.parse("sm_80").major = 9  # type: ignore[misc]


@pytest.mark.parametrize("bad", ["sm90", "sm_9", "sm_90b", "gfx90a", "", "sm_80a", "sm_70", 90])
def test_parse_rejects_with_typed_error(bad: object) -> None:
    with pytest.raises(TargetError) as info:
        Target.parse(bad)  # type: ignore[arg-type]
    assert isinstance(info.value, TyloError)
    message = str(info.value)
    assert repr(bad) in message or "sm_" in message
    if bad in ("sm90", "gfx90a", ""):
        assert "'sm_90a'" in message and "accepted forms" in message


def test_sm80a_error_names_the_fix() -> None:
    with pytest.raises(TargetError, match=r"sm_80a does not exist.*Use sm_80"):
        Target.parse("sm_80a")


@pytest.mark.parametrize(
    ("target", "spec", "expected"),
    [
        ("sm_90a", "cc>=8.0", True),
        ("sm_90a", "cc>=9.0a", True),
        ("sm_90", "cc>=9.0a", False),
        ("sm_80", "cc>=9.0a", False),
        ("sm_80", "cc>=8.0", True),
        ("sm_86", "cc>=8.0", True),
        ("sm_86", "cc>=8.9", False),
        ("sm_89", "cc>=8.9", True),
        ("sm_100a", "cc>=9.0a", True),
        ("sm_100a", "cc==9.0a", False),
        ("sm_90a", "cc==9.0a", True),
        ("sm_90a", "cc<10.0", True),
        ("sm_90a", "cc > 9.0", False),
        ("sm_90a", "cc<=9.0", True),
    ],
)
def test_satisfies(target: str, spec: str, expected: bool) -> None:
    assert Target.parse(target).satisfies(spec) is expected


@pytest.mark.parametrize("spec", ["cc>=8", "sm_90a", "cc=>8.0", "cc>=9.0b", "capability>=8.0"])
def test_bad_spec(spec: str) -> None:
    with pytest.raises(TargetError, match="not understood"):
        Target.parse("sm_90a").satisfies(spec)


def test_parse_spec() -> None:
    assert parse_spec("cc>=9.0a") == (">=", (9, 0), True)
    assert parse_spec(" cc == 8.6 ") == ("==", (8, 6), False)


def test_read_banner(tmp_path) -> None:
    f = tmp_path / "test_x.py"
    f.write_text('"""doc"""\n# TEST_TARGET: cc>=9.0a\nimport x\n')
    assert read_banner(f) == "cc>=9.0a"
    f.write_text("import x\n")
    assert read_banner(f) is None
    f.write_text("# TEST_TARGET: cc>=nine\n")
    with pytest.raises(TargetError):
        read_banner(f)
