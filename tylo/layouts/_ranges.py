"""The emptiness check of index ranges (private): an ``index_symbol(name, upper)`` whose range
is empty for every value of the symbols in ``upper`` is refused. It needs the fact engine
(_facts.py), which builds on the symbol classes (_symbols.py), so it lives above both and
installs itself into _fact_data when imported (tylo.layouts.symbolic imports it)."""

from __future__ import annotations

from typing import Any

from tylo.layouts import _fact_data
from tylo.layouts._fact_data import _text
from tylo.layouts._facts import facts_for
from tylo.layouts.errors import AssumptionError

__all__ = ["check_index_range"]


def check_index_range(name: str, upper: Any) -> None:
    """Refuse an index range ``0 <= name < upper`` that is empty for every value of the
    symbols in ``upper`` (its fact would contradict everything). A range empty for only
    some values (a loop's trip count) is accepted: its fact is used only for questions
    that mention the index."""
    try:
        f = facts_for(())
        p = f.poly(upper)
        if not f.integral(p):
            raise AssumptionError(
                f"index_symbol({name!r}, upper={_text(upper)}): upper is not an integer "
                "expression (it must bound an integer index); use dims whose facts make it "
                "an integer, e.g. dim('N', multiple_of=64) / 64"
            )
        empty = f.nonneg(f.poly(upper - 1)) is False
    except AssumptionError:
        raise
    except Exception as e:  # a sympy construct the fact engine cannot read
        raise AssumptionError(
            f"index_symbol({name!r}, upper={_text(upper)}): cannot read the upper bound "
            f"({type(e).__name__}: {e}); give an int or a polynomial over dims"
        ) from None
    if empty:
        raise AssumptionError(
            f"index_symbol({name!r}, upper={_text(upper)}): the range 0 <= {name} < "
            f"{_text(upper)} is empty for every value of the symbols (upper <= 0); give an "
            "exclusive upper bound that is >= 1"
        )


_fact_data.RANGE_CHECKS[:] = [check_index_range]  # IndexSymbol(...) runs it
