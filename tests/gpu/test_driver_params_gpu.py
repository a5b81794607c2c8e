# TEST_TARGET: cc>=8.0
"""Kernel parameter sizes read from the cubin agree with the driver, and learning them
calls nothing past the last parameter (what ``compute-sanitizer`` reports as API errors).

Compile-only half: the sizes read from each cubin equal the PTX ``.entry`` declarations
(in ``tests/nvvm/test_toolchain_link.py``). Runtime half: on the GPU the driver's own
``cuFuncGetParamInfo`` for every index below the count agrees with them, and
:meth:`Function.param_sizes` makes no parameter query at all.
"""

from __future__ import annotations

import pytest

from tylo.backend import compile_ir, driver
from tylo.backend.driver import I32, PTR, ArgPack, launch
from tylo.backend.errors import LaunchError
from tylo.backend.resources import cubin_param_sizes
from tylo.target import Target
from tylo.testing import raw_param_ir, shuffle_add_ir, spill_ir, vector_add_ir

KERNELS = [
    (vector_add_ir(), "vadd"),
    (spill_ir(), "spill"),
    (shuffle_add_ir(), "shfl_add"),
    (raw_param_ir(), "raw_param"),
    (raw_param_ir(name="raw3", size=3), "raw3"),
    (raw_param_ir(name="map128", size=128), "map128"),
]


INTERPRET_SKIP = (  # the interpreter tier (tests/interp_tier.py)
    "compares the parameter sizes read from cubins with the CUDA driver's: needs the driver"
)


class _Counting:
    """The bindings, with every parameter query counted."""

    def __init__(self, real) -> None:
        self._real = real
        self.queries: list[tuple[str, tuple]] = []

    def __getattr__(self, name):
        value = getattr(self._real, name)
        if name in ("cuFuncGetParamInfo", "cuFuncGetParamCount"):

            def counted(*args):
                self.queries.append((name, args[1:]))
                return value(*args)

            return counted
        return value


@pytest.mark.parametrize(("ir", "entry"), KERNELS, ids=[e for _, e in KERNELS])
def test_cubin_sizes_agree_with_the_driver(gpu_runtime: Target, ir: str, entry: str) -> None:
    module = compile_ir(ir, gpu_runtime)
    expected = cubin_param_sizes(module.cubin)[entry]
    fn = driver.Module.load(module.cubin).function(entry)
    d = driver._cuda()
    if hasattr(d, "cuFuncGetParamCount"):
        try:
            err, count = d.cuFuncGetParamCount(fn.handle)
        except RuntimeError:  # bindings newer than the driver
            err, count = 1, None
        if not err:
            assert count == len(expected)
    for index, size in enumerate(expected):  # never past the last parameter
        err, _, got = d.cuFuncGetParamInfo(fn.handle, index)
        assert not err and got == size, (entry, index)


def test_param_sizes_query_nothing(gpu_runtime: Target, monkeypatch) -> None:
    counting = _Counting(driver._cuda())
    monkeypatch.setattr(driver, "_driver", counting)
    fn = driver.Module.load(compile_ir(vector_add_ir(), gpu_runtime).cubin).function("vadd")
    assert fn.param_sizes() == (8, 8, 8, 4)
    with pytest.raises(LaunchError, match=r"4 parameter\(s\)"):
        launch(fn, 1, 32, ArgPack([PTR, PTR, I32]).pack(0, 0, 0))
    assert counting.queries == []
