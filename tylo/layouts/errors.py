"""Typed errors of :mod:`tylo.layouts`.

Every error names the operation that failed, its operands in CuTe notation, the condition
that does not hold, and how to fix it. All derive from :class:`LayoutError` (itself a
:class:`tylo.errors.TyloError`), so ``except LayoutError`` catches every layout failure.
"""

from __future__ import annotations

from tylo.errors import TyloError

__all__ = [
    "AssumptionError",
    "ComplementError",
    "CompositionError",
    "DivisibilityError",
    "InverseError",
    "LayoutError",
    "NotationError",
    "ShapeError",
    "SizeBudgetError",
    "StaticRequiredError",
    "SwizzleError",
    "UndecidableError",
]


class LayoutError(TyloError):
    """Base class of every error raised by :mod:`tylo.layouts`."""

    def within(self, context: str) -> LayoutError:
        """Return a copy of this error whose message is prefixed by ``context``.

        Outer operations (``logical_divide`` calling ``composition``) use it so a message
        names the operation the user called as well as the step that failed.
        """
        err = type(self).__new__(type(self))
        err.__dict__.update(self.__dict__)
        err.args = (f"{context}: {self.args[0] if self.args else ''}",)
        return err


class ShapeError(LayoutError):
    """A shape or stride is malformed: ranks differ, an extent is not a positive integer."""


class NotationError(ShapeError):
    """Text in CuTe notation could not be parsed (``Layout.parse``)."""


class CompositionError(LayoutError):
    """``composition(A, B)`` cannot be given: ``A(B(c))`` is not a layout of B's shape
    (checked, and then the message says so), or a condition tylo needs fails (named in the
    message, with no claim that no layout exists)."""


class ComplementError(LayoutError):
    """``complement(A, cotarget)`` cannot be given: non-existence is claimed only when
    ``filter_(A)`` is not injective; otherwise the message names the condition tylo needs
    (e.g. sorted strides that do not divide each other). Stride-0 modes alone never raise
    it: complement drops them first, as CuTe does (``complement(2:0, 4)`` is ``4:1``)."""


class InverseError(LayoutError):
    """A left or right inverse does not exist as a layout (e.g. A is not injective)."""


class SwizzleError(LayoutError):
    """A swizzle's parameters are invalid (negative bits, masks that overlap)."""


class DivisibilityError(LayoutError):
    """An exact division was asked for and the divisor provably does not divide."""


class StaticRequiredError(LayoutError):
    """A static (plain int) value was needed and a symbolic one was given."""


class AssumptionError(LayoutError):
    """Assumptions are malformed or unsatisfiable, or no satisfying values could be found."""


class UndecidableError(LayoutError):
    """A decision needed a fact that the symbols and assumptions do not give.

    Attributes: ``operation`` (what was being computed), ``condition`` (the statement that
    could not be decided, as text) and ``hint`` (how to supply the fact).
    """

    def __init__(self, message: str, *, operation: str = "", condition: str = "", hint: str = ""):
        super().__init__(message)
        self.operation = operation
        self.condition = condition
        self.hint = hint


class SizeBudgetError(LayoutError):
    """An operation would enumerate more elements than the size budget allows.

    The budget is :data:`tylo.layouts._budget.ENUMERATION_LIMIT` (documented in
    ``docs/proofs.md``). Attributes: ``operation``, ``count`` (what it would enumerate)
    and ``limit``.
    """

    def __init__(self, message: str, *, operation: str = "", count: int = 0, limit: int = 0):
        super().__init__(message)
        self.operation = operation
        self.count = count
        self.limit = limit
