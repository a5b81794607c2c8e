"""The linker's log: performance-loss notes (ptxas C75xx, e.g. a dropped ``setmaxnreg``)
become CompileWarnings even though they are "info" lines; the plain resource report does
not warn."""

from __future__ import annotations

import warnings

import pytest

from tylo.backend.errors import CompileWarning
from tylo.backend.link import _warn_unusual

REPORT = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k' for 'sm_90a'
ptxas info    : Function properties for k
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 14 registers, used 0 barriers
info    : used 14 registers, used 5 barriers, 0 stack, 0 bytes smem, 560 bytes cmem[0], 0 bytes lmem"""  # noqa: E501 - a verbatim nvJitLink line


def test_resource_report_is_quiet() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _warn_unusual(REPORT, "k")


@pytest.mark.parametrize(
    "line",
    [
        "ptxas info    : (C7504) Potential Performance Loss: 'setmaxnreg' ignored to maintain "
        "compatibility across compilation units.",
        "ptxas info    : (C7508) Potential Performance Loss: 'setmaxnreg' ignored; unable to "
        "determine register count at entry.",
        "ptxas warning : Registers are spilled to local memory in function 'k'",
    ],
)
def test_performance_loss_warns(line: str) -> None:
    with pytest.warns(CompileWarning, match="setmaxnreg|spilled"):
        _warn_unusual(line + "\n" + REPORT, "k")
