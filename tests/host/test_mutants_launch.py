"""The launch checks of a compiled specialization (tylo.kernel.launch), on a fake module (no
libNVVM, no GPU): tests written to kill mutants that survived tools/mutate.py.

Each test states the rule it pins: which stage a name gives; that a device's function is
loaded once; when dynamic shared memory needs the opt-in (above the 48 KB default, and only
above what was already allowed on that device); the int and alignment checks as data and as
expressions, against a brute-force statement of the parameter's facts; the width of a runtime
int in the argument pack; which grids :func:`launch_dims` accepts; and the cluster launch's
grid check and non-portable opt-in.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tylo
from tylo.backend import launchex
from tylo.kernel import launch as launch_mod
from tylo.kernel.clusters import ClusterError
from tylo.kernel.launch import CompiledKernel, launch_dims
from tylo.kernel.spec import Int, ParamKind, Ptr
from tylo.kernel.trace import Binding

KB48 = 48 * 1024  # CUDA: dynamic shared memory a launch may use without the opt-in


class FakeFunction:
    def __init__(self, ordinal):
        self.ordinal = ordinal
        self.limits: list[int] = []

    def set_max_dynamic_shared_memory(self, n):
        self.limits.append(n)


class FakeModule:
    """Stages by name, and ``load(ordinal).function(entry)`` counted."""

    llvm, ptx, cubin = "llvm text", "ptx text", b"cubin bytes"

    def __init__(self):
        self.loads: list[int] = []

    def stage(self, name):
        return {"llvm": self.llvm, "ptx": self.ptx, "cubin": self.cubin}[name]

    def sass_for(self, entry):
        return f"sass of {entry}"

    def load(self, ordinal):
        self.loads.append(ordinal)
        return SimpleNamespace(function=lambda entry: FakeFunction(ordinal))


def compiled(bindings=(), index_bits=64, dyn=0, cluster=None):
    return CompiledKernel(
        name="k",
        module=FakeModule(),
        entry="k_entry",
        bindings=bindings,
        runtime=tuple(range(len(bindings))),
        block=(32, 1, 1),
        index_bits=index_bits,
        dynamic_shared_bytes=dyn,
        timings={},
        cluster=cluster,
    )


def test_stages_by_name():
    ck = compiled()
    assert [ck.stage(n) for n in ("llvm", "ptx", "cubin", "sass")] == [
        "llvm text", "ptx text", b"cubin bytes", "sass of k_entry"
    ]  # fmt: skip


def test_each_device_loads_the_function_once():
    ck = compiled()
    f0 = ck.function(0)
    assert isinstance(f0, FakeFunction) and ck.function(0) is f0 and f0.ordinal == 0
    f1 = ck.function(1)
    assert f1 is not f0 and f1.ordinal == 1 and ck.function(1) is f1
    assert ck.module.loads == [0, 1]


def test_dynamic_shared_memory_opts_in_exactly_above_what_is_allowed():
    ck = compiled()
    ck.check((), KB48, 0)  # the default limit itself: no opt-in
    assert ck.function(0).limits == []
    ck.check((), KB48 + 1, 0)
    assert ck.function(0).limits == [KB48 + 1]
    ck.check((), KB48 + 1, 0)  # already allowed on this device
    ck.check((), 1000, 0)
    assert ck.function(0).limits == [KB48 + 1]
    ck.check((), 100_000, 0)
    assert ck.function(0).limits == [KB48 + 1, 100_000]
    ck.check((), KB48 + 1, 1)  # another device: its own opt-in
    assert ck.function(1).limits == [KB48 + 1]


def test_dynamic_shared_memory_below_the_views_is_refused():
    ck = compiled(dyn=1024)
    ck.check((), 1024, 0)
    with pytest.raises(tylo.KernelArgumentError, match="need 1024 bytes.*shared=1023"):
        ck.check((), 1023, 0)


INTS = [
    Int(),  # default: positive
    Int(min=0),
    Int(min=5, max=10, multiple_of=5),
    Int(min=0, multiple_of=8),
    Int(max=2**40),
]
EDGES = [-(2**63) - 1, -(2**63), -6, -5, -1, 0, 1, 5, 8, 10, 11, 2**31 - 1, 2**31, 2**40,
         2**40 + 1, 2**63 - 1, 2**63]  # fmt: skip


def brute_int(check: Int, v: int, index_bits: int) -> bool:
    """The facts of a runtime int, stated directly: within [min, max], a multiple, and
    representable in the kernel's signed index type."""
    hi = 2 ** (index_bits - 1) - 1
    ok = check.min <= v <= hi and (check.max is None or v <= check.max)
    return ok and v % check.multiple_of == 0


@pytest.mark.parametrize("index_bits", [32, 64])
@pytest.mark.parametrize("check", INTS, ids=str)
def test_int_checks_as_data_and_as_expressions_agree_with_the_facts(check, index_bits):
    ck = compiled([Binding("n", ParamKind.INT, check=check)], index_bits=index_bits)
    hi = 2 ** (index_bits - 1) - 1
    want_hi = hi if check.max is None else min(hi, check.max)
    assert ck.check_values() == ([(0, check.min, want_hi, check.multiple_of)], [])
    terms = ck.check_terms()
    for v in EDGES:
        want = brute_int(check, v, index_bits)
        assert all(eval(t, {}, {"v": [v]}) for t in terms) == want, (v, terms)  # noqa: S307
        lo, top, mult = ck.check_values()[0][0][1:]
        assert (lo <= v <= top and v % mult == 0) == want, v
        if want:
            ck.check((v,), 0, 0)
        else:
            with pytest.raises(tylo.KernelArgumentError):
                ck.check((v,), 0, 0)


@pytest.mark.parametrize(
    "dtype,ptr,align",
    [(tylo.f32, Ptr(), 4), (tylo.f32, Ptr(align=16), 16), (tylo.u8, Ptr(), 1),
     (tylo.f64, Ptr(align=4), 8), (tylo.bf16, None, 2)],
)  # fmt: skip
def test_pointer_alignment_as_data_and_at_launch(dtype, ptr, align):
    ck = compiled([Binding("x", ParamKind.POINTER, dtype=dtype, check=ptr)])
    assert ck.check_values() == ([], [(0, align)] if align > 1 else [])
    for address in (0x1000, 0x1000 + align, 0x1000 + 1, 0x1000 + align // 2):
        ok = address % align == 0
        assert all(eval(t, {}, {"v": [address]}) for t in ck.check_terms()) == ok  # noqa: S307
        if ok:
            ck.check((address,), 0, 0)
        else:
            with pytest.raises(tylo.KernelArgumentError):
                ck.check((address,), 0, 0)


@pytest.mark.parametrize("index_bits,size", [(32, 4), (64, 8)])
def test_runtime_ints_are_packed_at_the_index_width(index_bits, size):
    bindings = [
        Binding("n", ParamKind.INT, check=Int()),
        Binding("x", ParamKind.POINTER, dtype=tylo.f32, check=Ptr()),
        Binding("a", ParamKind.FLOAT, dtype=tylo.f32),
        Binding("b", ParamKind.FLOAT, dtype=tylo.f64),
    ]
    ck = compiled(bindings, index_bits=index_bits)
    assert ck.argpack().sizes == (size, 8, 4, 8)
    assert ck.argpack() is ck.argpack()  # one per thread


def test_launch_dims_of_valid_grids():
    block = (128, 1, 1)
    assert launch_dims(7, block) == (7, 1, 1, 128, 1, 1)
    assert launch_dims((2, 3), block) == (2, 3, 1, 128, 1, 1)
    assert launch_dims([2, 3, 4], block) == (2, 3, 4, 128, 1, 1)
    assert launch_dims((2**32 - 1,), block) == (2**32 - 1, 1, 1, 128, 1, 1)
    # CUDA grid dimensions are 32-bit: 2**32 and past it are no grid
    for bad in (2**32, (2**32,), (1, 2**32), (2**33 - 1,), 0, (1, 0), (), (1, 2, 3, 4)):
        assert launch_dims(bad, block) is None, bad


@settings(max_examples=200, deadline=None)
@given(
    st.one_of(
        st.integers(-3, 2**33),
        st.lists(st.one_of(st.integers(-3, 2**33), st.booleans(), st.floats(0, 4)), max_size=5),
        st.none(),
        st.text(max_size=2),
    )
)
def test_launch_dims_accepts_exactly_one_to_three_positive_32_bit_ints(grid):
    dims = grid if isinstance(grid, list) else [grid] if type(grid) is int else None
    ok = (
        dims is not None
        and 1 <= len(dims) <= 3
        and all(type(d) is int and 1 <= d <= 2**32 - 1 for d in dims)
    )
    got = launch_dims(grid, (32, 1, 1))
    assert (got is not None) == ok
    if ok:
        assert got == (*dims, 1, 1)[:3] + (32, 1, 1)


@pytest.fixture
def cluster_calls(monkeypatch):
    calls = []
    monkeypatch.setattr(
        launchex, "launch_cluster", lambda fn, grid, *a, **kw: calls.append(("launch", grid, kw))
    )
    monkeypatch.setattr(
        launchex, "allow_non_portable_clusters", lambda fn: calls.append(("allow", fn.ordinal))
    )
    return calls


def test_cluster_launches_check_the_grid_and_opt_in_large_clusters(cluster_calls):
    ck = compiled(cluster=(2, 1, 1))
    ck.launch((4, 1), (), 0, None, 0)
    assert cluster_calls == [("launch", (4, 1), {"cluster": (2, 1, 1), "shared_bytes": 0,
                                                 "stream": None})]  # fmt: skip
    with pytest.raises(ClusterError, match="not a whole number of clusters"):
        ck.launch((3, 1), (), 0, None, 0)
    # a grid launch_dims cannot read goes to the driver's own checks, not a crash here
    ck.launch((0,), (), 0, None, 0)
    assert cluster_calls[-1][:2] == ("launch", (0,))
    big = compiled(cluster=(16, 1, 1))
    for ordinal in (0, 0, 1):
        big.launch((16,), (), 0, None, ordinal)
    assert [c for c in cluster_calls if c[0] == "allow"] == [("allow", 0), ("allow", 1)]
    eight = compiled(cluster=(8, 1, 1))  # portable: no opt-in
    eight.launch((8,), (), 0, None, 0)
    assert [c for c in cluster_calls if c[0] == "allow"] == [("allow", 0), ("allow", 1)]


def test_the_default_shared_limit_is_48_kb():
    assert launch_mod._DEFAULT_SMEM_LIMIT == KB48


# ------------------------------------------------------------- readers (tylo.kernel.readers)

PTR = 0x7F00_0000_1000


class CAIWithDataPtr:
    """A CUDA-array-interface producer that also has a ``data_ptr`` method (as some
    libraries do) but is not a torch tensor: read through its interface."""

    def __init__(self):
        self.__cuda_array_interface__ = {
            "shape": (4, 8), "typestr": "<f4", "data": (PTR, False), "version": 3,
            "strides": None,
        }  # fmt: skip

    def data_ptr(self):
        raise AssertionError("a non-torch array is not read as a torch tensor")


def test_a_non_torch_array_with_data_ptr_is_read_through_its_interface():
    from tylo.kernel.readers import make_reader

    kind, read = make_reader(None, CAIWithDataPtr(), "x")
    assert kind is ParamKind.POINTER
    assert read(CAIWithDataPtr()) == (("f32", None), PTR)  # the interface names no device


def _buffer(ptr, shape=(256,), dtype=tylo.f32):
    from tylo.arrays import DeviceBuffer

    b = DeviceBuffer.__new__(DeviceBuffer)  # no allocation: a made-up address
    DeviceBuffer.__init__(b, ptr, shape, dtype, 0)
    return b


def test_an_owned_buffer_is_read_as_its_dtype_device_and_address():
    from tylo.kernel.readers import inline_spec, make_reader

    kind, read = make_reader(None, _buffer(PTR), "x")
    assert kind is ParamKind.POINTER
    assert read(_buffer(PTR)) == (("f32", 0), PTR)
    assert read(_buffer(0, shape=(0,))) == (("f32", 0), 0)  # empty: a null address is fine
    with pytest.raises(tylo.KernelArgumentError, match="null address"):
        read(_buffer(0))
    spec = inline_spec(read, _buffer(PTR))
    assert spec is not None and spec.kind == "owned"


@pytest.mark.parametrize("value", [3, 2.5, "sum", None, True])
def test_static_values_inline_as_their_type_and_value(value):
    from tylo.kernel.readers import inline_spec, make_reader

    kind, read = make_reader(tylo.Static, value, "s")
    assert kind is ParamKind.STATIC
    spec = inline_spec(read, value)
    assert spec is not None and spec.kind == "static"
    assert spec.value == value and type(spec.value) is type(value)


# ----------------------------------------------- none_arguments_blamed: which failures blame


def _kernel_taking(*annotations):
    names = [f"p{i}" for i in range(len(annotations))]
    return SimpleNamespace(name="k", param_names=names, annotations=list(annotations))


@pytest.mark.parametrize(
    "message,original,blames",
    [
        ("tylo.view: NoneType has no shape", None, True),  # tylo's own TraceError
        ("tylo.view: a float has no shape", None, False),  # ...not about a None
        ("trace failed", TypeError("unsupported operand 'NoneType' and 'int'"), True),
        ("trace failed", AttributeError("'NoneType' object has no attribute 'x'"), True),
        ("trace failed", TypeError("unsupported operand 'float' and 'int'"), False),
        ("NoneType mentioned", ValueError("'NoneType' here"), False),  # other exception kinds
    ],
)
def test_none_arguments_are_blamed_exactly_for_failures_on_a_none(message, original, blames):
    from tylo.kernel.errors import TraceError
    from tylo.kernel.launch import none_arguments_blamed

    err = TraceError(message, original=original)
    kern = _kernel_taking(None, None, tylo.Static)
    for args, named in [((None, 1, None), "'p0'"), ((1, None, 1), "'p1'"),
                        ((None, None, 1), "'p0' or 'p1'"), ((1, 2, None), None)]:  # fmt: skip
        got = none_arguments_blamed(kern, args, err)
        if blames and named:
            assert isinstance(got, tylo.KernelArgumentError), args
            assert f"argument {named} is None" in str(got)
        else:
            assert got is None, args
