"""``tylo.target.KNOWN_CAPABILITIES`` (the targets ``tylo compile`` accepts when it parses
its arguments) is exactly the set this libNVVM compiles for, probed by brute force over
every well-formed target (compute capability 7.5 to 15.9, with and without ``a``)."""

from __future__ import annotations

from tylo.backend import CompileError, compile_nvvm
from tylo.target import KNOWN_CAPABILITIES, Target, TargetError
from tylo.testing import vector_add_ir


def test_known_capabilities_are_what_libnvvm_compiles_for() -> None:
    accepted, refused = set(), set()
    for major in range(7, 16):
        for minor in range(10):
            for arch_specific in (False, True):
                try:
                    target = Target(major, minor, arch_specific)
                except TargetError:
                    continue  # below 7.5, or 'a' before 9.0: not a Target at all
                try:
                    compile_nvvm(vector_add_ir(), target)
                except CompileError:
                    refused.add(target)
                    continue
                accepted.add(target)
                assert target.known, f"libNVVM compiles for {target}; add it to KNOWN"
    assert not {t for t in refused if t.known}, "known targets libNVVM refuses"
    assert {(t.major, t.minor) for t in accepted} == KNOWN_CAPABILITIES
    assert Target.parse("sm_90a") in accepted and not Target.parse("sm_99").known
