"""Compilation targets: an explicit, frozen GPU architecture value.

A :class:`Target` names the architecture a kernel is compiled for (``sm_90a``). It is
hashable and part of every kernel specialization and cache key. Compiling needs only a
target, never a device; :meth:`Target.from_device` reads one from a GPU when there is one.

Arch-specific targets (the ``a`` suffix, e.g. ``sm_90a``) unlock instructions that exist on
exactly that architecture (wgmma, setmaxnreg on 9.0; tcgen05 on 10.0) and do not carry
forward to later ones (PTX ISA, "Target ISA notes"). Every device of compute capability 9.0
or newer can run code built for its own ``a`` target, so :meth:`Target.from_device` returns
the arch-specific target for such devices.
"""

from __future__ import annotations

import operator
import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from tylo.errors import TyloError

__all__ = ["KNOWN_CAPABILITIES", "MAX_SHARED_BYTES", "Target", "TargetError", "parse_spec"]

# Oldest architecture CUDA 13 (libNVVM 13, nvJitLink 13) still compiles for (Turing).
MIN_CC = (7, 5)
# Arch-specific ('a') variants exist from compute capability 9.0 on.
MIN_ARCH_SPECIFIC_MAJOR = 9
#: The compute capabilities CUDA 13's libNVVM compiles for (each also with the ``a``
#: suffix from 9.0 on); ``sm_99`` parses as a Target but names no GPU. The command line
#: refuses a target outside this set when it parses its arguments (:attr:`Target.known`).
KNOWN_CAPABILITIES = frozenset(
    {
        (7, 5),
        (8, 0),
        (8, 6),
        (8, 7),
        (8, 8),
        (8, 9),
        (9, 0),
        (10, 0),
        (10, 3),
        (10, 7),
        (11, 0),
        (12, 0),
        (12, 1),
    }
)

_FORMS = "'sm_90a', 'sm_80', 'compute_90a', '90a', '9.0a' or a Target"
_TARGET_RE = re.compile(r"^(?:(?:sm|compute)_)?(\d{1,2})(\d)(a?)$")
_DOTTED_RE = re.compile(r"^(\d{1,2})\.(\d)(a?)$")
_SPEC_RE = re.compile(r"^cc\s*(>=|<=|==|>|<)\s*(\d{1,2})\.(\d)(a?)$")
_OPS: dict[str, Callable[[object, object], bool]] = {
    ">=": operator.ge,
    "<=": operator.le,
    "==": operator.eq,
    ">": operator.gt,
    "<": operator.lt,
}


class TargetError(TyloError, ValueError):
    """A target or target spec that cannot be parsed or is not supported."""


@dataclass(frozen=True)
class Target:
    """A GPU architecture: compute capability ``major.minor`` plus the ``a`` flag.

    >>> t = Target.parse("sm_90a")
    >>> t.sm, t.compute, t.cc, t.arch_specific
    ('sm_90a', 'compute_90a', (9, 0), True)
    >>> Target.parse("sm_80").satisfies("cc>=9.0a")
    False
    """

    major: int
    minor: int
    arch_specific: bool = False

    def __post_init__(self) -> None:
        if not (isinstance(self.major, int) and isinstance(self.minor, int)):
            raise TargetError(
                f"Target: major and minor must be ints, got {self.major!r}, {self.minor!r}"
            )
        if (self.major, self.minor) < MIN_CC or not 0 <= self.minor <= 9:
            raise TargetError(
                f"Target: compute capability {self.major}.{self.minor} is not supported; "
                f"CUDA 13 compiles for compute capability {MIN_CC[0]}.{MIN_CC[1]} and newer"
            )
        if self.arch_specific and self.major < MIN_ARCH_SPECIFIC_MAJOR:
            raise TargetError(
                f"Target: sm_{self.major}{self.minor}a does not exist; arch-specific ('a') "
                f"targets start at sm_90a. Use sm_{self.major}{self.minor}"
            )

    @classmethod
    def parse(cls, text: str | Target) -> Target:
        """Parse ``'sm_90a'``, ``'sm_80'``, ``'compute_90a'``, ``'90a'`` or ``'9.0a'``."""
        if isinstance(text, Target):
            return text
        if not isinstance(text, str):
            raise TargetError(f"Target.parse: expected a string like {_FORMS}, got {text!r}")
        s = text.strip().lower()
        m = _TARGET_RE.match(s) or _DOTTED_RE.match(s)
        if m is None:
            raise TargetError(f"Target.parse: cannot parse {text!r}; accepted forms: {_FORMS}")
        major, minor, a = int(m.group(1)), int(m.group(2)), m.group(3) == "a"
        try:
            return cls(major, minor, a)
        except TargetError as err:
            raise TargetError(f"Target.parse({text!r}): {err}") from None

    @classmethod
    def from_device(cls, ordinal: int = 0) -> Target:
        """The target of CUDA device ``ordinal``: its compute capability, arch-specific
        (``a``) from 9.0 on. Raises :class:`~tylo.backend.errors.NoDeviceError` when there is
        no driver, no GPU, or no such ordinal. With ``TYLO_INTERPRET=1``, the interpreter's
        device 0 (:func:`tylo.backend.device.interpreted_properties`)."""
        from tylo.backend import driver

        if os.environ.get("TYLO_INTERPRET") == "1":
            from tylo.backend.errors import NoDeviceError

            if ordinal != 0:
                raise NoDeviceError(
                    f"no CUDA device {ordinal}: the interpreter (TYLO_INTERPRET=1) emulates "
                    "device 0 only"
                )
            t = cls.parse(os.environ.get("TYLO_INTERPRET_TARGET", "sm_80"))
            return cls(t.major, t.minor, t.major >= MIN_ARCH_SPECIFIC_MAJOR)

        major, minor = driver.compute_capability(ordinal)
        return cls(major, minor, major >= MIN_ARCH_SPECIFIC_MAJOR)

    @property
    def known(self) -> bool:
        """Whether this is the compute capability of a GPU CUDA 13 compiles for
        (:data:`KNOWN_CAPABILITIES`); ``Target(9, 9)`` is well formed but not known."""
        return (self.major, self.minor) in KNOWN_CAPABILITIES

    @property
    def sm(self) -> str:
        """The SASS architecture name, e.g. ``'sm_90a'`` (nvJitLink/ptxas ``-arch``)."""
        return f"sm_{self.major}{self.minor}{'a' if self.arch_specific else ''}"

    @property
    def compute(self) -> str:
        """The virtual architecture name, e.g. ``'compute_90a'`` (libNVVM ``-arch``)."""
        return f"compute_{self.major}{self.minor}{'a' if self.arch_specific else ''}"

    @property
    def cc(self) -> tuple[int, int]:
        """The compute capability as ``(major, minor)``."""
        return (self.major, self.minor)

    @property
    def max_shared_bytes(self) -> int:
        """The shared memory (static plus dynamic, in bytes) one block may use on this
        target, once a kernel opts in to more than 48 KiB: 163 KiB on sm_80 and sm_87, 99 KiB
        on sm_86, sm_89 and sm_120, 227 KiB on sm_90 and sm_100, 64 KiB on sm_75. Raises
        :class:`TargetError` for a compute capability tylo has no figure for.

        >>> tuple(Target.parse(t).max_shared_bytes // 1024 for t in ("sm_90a", "sm_80", "sm_86"))
        (227, 163, 99)
        """
        kib = _SHARED_KIB.get(self.cc)
        if kib is None:
            raise TargetError(
                f"Target {self.sm}: tylo does not know how much shared memory a block may use "
                f"on compute capability {self.major}.{self.minor}; known: "
                + ", ".join(f"{a}.{b}" for a, b in _SHARED_KIB)
            )
        return kib * 1024

    def satisfies(self, spec: str) -> bool:
        """Whether this target meets a requirement such as ``'cc>=8.0'`` or ``'cc>=9.0a'``.

        The comparison is on the compute capability (operators ``>=``, ``>``, ``==``,
        ``<=``, ``<``). A trailing ``a`` additionally requires an arch-specific target:
        ``sm_90a`` satisfies ``cc>=9.0a`` while ``sm_90`` and ``sm_80`` do not. Note that
        arch-specific features do not carry forward: a kernel needing wgmma should state
        ``cc==9.0a``.

        >>> Target.parse("sm_90a").satisfies("cc>=8.0"), Target.parse("sm_90").satisfies("cc>=9.0a")
        (True, False)
        """
        op, cc, needs_a = parse_spec(spec)
        if needs_a and not self.arch_specific:
            return False
        return _OPS[op](self.cc, cc)

    def __str__(self) -> str:
        return self.sm


def parse_spec(spec: str) -> tuple[str, tuple[int, int], bool]:
    """Split a requirement ``'cc>=9.0a'`` into ``('>=', (9, 0), True)``."""
    m = _SPEC_RE.match(spec.strip().lower()) if isinstance(spec, str) else None
    if m is None:
        raise TargetError(
            f"target spec {spec!r} not understood; expected 'cc>=8.0', 'cc>=9.0a', 'cc==9.0a' "
            "(operators >=, >, ==, <=, <; a trailing 'a' requires an arch-specific target)"
        )
    return m.group(1), (int(m.group(2)), int(m.group(3))), m.group(4) == "a"


# compute capability -> the shared memory one block may use, in KiB: the opt-in maximum of
# dynamic shared memory per block (cudaFuncAttributeMaxDynamicSharedMemorySize; CUDA C++
# Programming Guide, "Technical Specifications per Compute Capability"). The SM holds 1 KiB
# more per resident block (the driver's reservation), which this does not count.
_SHARED_KIB = {
    (7, 5): 64,
    (8, 0): 163, (8, 6): 99, (8, 7): 163, (8, 9): 99,
    (9, 0): 227,
    (10, 0): 227, (10, 3): 227, (11, 0): 227,
    (12, 0): 99, (12, 1): 99,
}  # fmt: skip
MAX_SHARED_BYTES = max(_SHARED_KIB.values()) * 1024
"""The most shared memory a block may use on any target tylo knows (227 KiB, sm_90 on)."""
