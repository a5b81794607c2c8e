"""Kernel parameter sizes without probing: from the cubin, else a count from the driver.

``compute-sanitizer --tool memcheck`` reports every ``cuFuncGetParamInfo`` call past a
kernel's last parameter as an API error. Here a fake driver records every call while
:class:`tylo.backend.driver.Function` learns parameter sizes, and cubins are built in
memory (ELF images with the ``.nv.info.<kernel>`` records the linker writes), so the
tests need neither a GPU nor a compiler.
"""

from __future__ import annotations

import struct
import threading

import pytest
from cuda.bindings import driver as cu  # a dependency of tylo: never a skip
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tylo.backend import driver
from tylo.backend.argpack import I32, PTR, ArgPack
from tylo.backend.errors import LaunchError
from tylo.backend.resources import (
    EIATTR_KPARAM_INFO,
    EIATTR_PARAM_CBANK,
    CubinFormatError,
    cubin_param_sizes,
)

# ---------------------------------------------------------------- cubins built in memory


def _align(n: int, a: int) -> int:
    return -(-n // a) * a


def layout(sizes: list[int], aligns: list[int]) -> list[int]:
    """Offsets of parameters laid out in order, each at its alignment."""
    offsets, end = [], 0
    for size, align in zip(sizes, aligns, strict=True):
        end = _align(end, align)
        offsets.append(end)
        end += size
    return offsets


def kparam(ordinal: int, offset: int, size: int) -> bytes:
    """One EIATTR_KPARAM_INFO record (EIFMT_SVAL, 12-byte payload; size in bits 18..31)."""
    return struct.pack("<BBHIHHI", 0x04, EIATTR_KPARAM_INFO, 12, 0, ordinal, offset, size << 18)


def cbank(block: int) -> bytes:
    """The EIATTR_PARAM_CBANK record: the parameter block's slot and size."""
    return struct.pack("<BBHIHH", 0x04, EIATTR_PARAM_CBANK, 8, 0, 0x210, block)


def info_records(sizes: list[int], aligns: list[int] | None = None) -> bytes:
    aligns = aligns or [min(s, 8) or 1 for s in sizes]
    offsets = layout(sizes, aligns)
    records = [kparam(i, o, s) for i, (o, s) in reversed(list(enumerate(zip(offsets, sizes))))]
    block = offsets[-1] + sizes[-1] if sizes else 0
    other = struct.pack("<BBH", 0x03, 0x1B, 0xFF)  # an EIFMT_HVAL attribute to step over
    return other + (cbank(block) if sizes else b"") + b"".join(records)


def build_cubin(kernels: dict[str, bytes], helpers: tuple[str, ...] = ()) -> bytes:
    """A 64-bit little-endian ELF with one entry symbol and one ``.nv.info.<name>``
    section (holding the given records) per kernel, and plain functions ``helpers``."""
    names = [""] + [f".nv.info.{k}" for k in kernels] + [".shstrtab", ".strtab", ".symtab"]
    shstr = b"\0".join(n.encode() for n in names) + b"\0"
    name_at = {n: shstr.index(n.encode() + b"\0") if n else 0 for n in names}
    strtab = b"\0" + b"".join(k.encode() + b"\0" for k in [*kernels, *helpers])
    symbols = [struct.pack("<IBBHQQ", 0, 0, 0, 0, 0, 0)]
    for k in kernels:
        symbols.append(
            struct.pack("<IBBHQQ", strtab.index(k.encode() + b"\0"), 0x12, 0x10, 0, 0, 0)
        )
    for h in helpers:
        symbols.append(struct.pack("<IBBHQQ", strtab.index(h.encode() + b"\0"), 0x12, 0, 0, 0, 0))
    blobs = [*kernels.values(), shstr, strtab, b"".join(symbols)]
    offset, headers, data = 64, [bytes(64)], b""
    strtab_index = len(names) - 2
    for i, blob in enumerate(blobs, start=1):
        kind = {len(names) - 3: 3, len(names) - 2: 3, len(names) - 1: 2}.get(i, 0x70000000)
        link = strtab_index if kind == 2 else 0
        headers.append(
            struct.pack(
                "<IIQQQQIIQQ", name_at[names[i]], kind, 0, 0, offset, len(blob), link, 0, 1, 0
            )
        )
        data += blob
        offset += len(blob)
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", header, 0x28, offset)
    struct.pack_into("<HHH", header, 0x3A, 64, len(headers), len(names) - 3)
    return bytes(header) + data + b"".join(headers)


PARAM = st.sampled_from([(8, 8), (4, 4), (16, 8), (128, 64), (3, 1), (2, 2), (1, 1)])


@settings(max_examples=80, deadline=None)
@given(st.lists(PARAM, max_size=12), st.lists(PARAM, max_size=3))
def test_param_sizes_are_read_back_exactly(params, other) -> None:
    sizes, aligns = [s for s, _ in params], [a for _, a in params]
    cubin = build_cubin(
        {"k": info_records(sizes, aligns), "other": info_records([s for s, _ in other])},
        helpers=("helper",),
    )
    got = cubin_param_sizes(cubin)
    assert got == {"k": tuple(sizes), "other": tuple(s for s, _ in other)}


@settings(max_examples=60, deadline=None)
@given(st.lists(PARAM, min_size=1, max_size=8), st.data())
def test_incomplete_or_inconsistent_records_are_unknown_never_guessed(params, data) -> None:
    sizes, aligns = [s for s, _ in params], [a for _, a in params]
    offsets = layout(sizes, aligns)
    block = offsets[-1] + sizes[-1]
    records = [kparam(i, o, s) for i, (o, s) in enumerate(zip(offsets, sizes))]
    flaw = data.draw(st.sampled_from(["drop", "block", "no block", "duplicate"]))
    if flaw == "drop":  # a parameter without its record
        del records[data.draw(st.integers(0, len(records) - 1))]
        blob = cbank(block) + b"".join(records)
    elif flaw == "block":  # the records do not end where the block ends
        blob = cbank(block + data.draw(st.sampled_from([-1, 1, 4, 64]))) + b"".join(records)
    elif flaw == "no block":
        blob = b"".join(records)
    else:  # an ordinal twice, so one is missing
        records.append(kparam(len(records), offsets[0], sizes[0]))
        records[0] = kparam(len(records) - 1, offsets[0], sizes[0])
        blob = cbank(block) + b"".join(records)
    assert cubin_param_sizes(build_cubin({"k": blob})) == {}


@pytest.mark.parametrize(
    "image",
    [b"", b"\x7fELF", b"not an elf at all" * 8, b"\x7fELF\x01\x01" + bytes(70)],
)
def test_images_that_are_not_readable_cubins_raise_the_internal_error(image: bytes) -> None:
    with pytest.raises(CubinFormatError):
        cubin_param_sizes(image)


# ---------------------------------------------------------------- the fake driver


class ParamDriver:
    """The driver calls a Module load and the parameter queries make, recorded."""

    def __init__(self, sizes: tuple[int, ...], *, with_count: bool = True, count_error=None):
        self.CUresult = cu.CUresult
        self.ok = cu.CUresult.CUDA_SUCCESS
        self.sizes = sizes
        self.info_calls: list[int] = []
        self.count_calls = 0
        self.count_error = count_error
        if with_count:
            self.cuFuncGetParamCount = self._count

    def cuInit(self, flags):
        return (self.ok,)

    def cuDeviceGetCount(self):
        return (self.ok, 1)

    def cuDeviceGet(self, i):
        return (self.ok, i)

    def cuDevicePrimaryCtxRetain(self, dev):
        return (self.ok, "ctx")

    def cuCtxSetCurrent(self, ctx):
        return (self.ok,)

    def cuModuleLoadData(self, image):
        return (self.ok, "module")

    def cuModuleGetFunction(self, module, name):
        return (self.ok, f"fn:{name.decode()}")

    def _count(self, fn):
        self.count_calls += 1
        if isinstance(self.count_error, Exception):
            raise self.count_error
        if self.count_error is not None:
            return (self.count_error, 0)
        return (self.ok, len(self.sizes))

    def cuFuncGetParamInfo(self, fn, i):
        self.info_calls.append(i)
        if i >= len(self.sizes):  # what compute-sanitizer reports as an API error
            return (self.CUresult.CUDA_ERROR_INVALID_VALUE, 0, 0)
        return (self.ok, 8 * i, self.sizes[i])


@pytest.fixture
def use_driver(monkeypatch):
    def install(fake: ParamDriver) -> ParamDriver:
        monkeypatch.setattr(driver, "_driver", fake)
        monkeypatch.setattr(driver, "_initialized", False)
        monkeypatch.setattr(driver, "_init_error", None)
        monkeypatch.setattr(driver, "_contexts", {})
        monkeypatch.setattr(driver, "_tls", threading.local())
        return fake

    return install


FIXTURE_OK = [HealthCheck.function_scoped_fixture]  # the driver is re-installed per example


@settings(max_examples=40, deadline=None, suppress_health_check=FIXTURE_OK)
@given(st.lists(PARAM, max_size=10), st.booleans())
def test_a_readable_cubin_needs_no_driver_query(use_driver, params, with_count) -> None:
    sizes = tuple(s for s, _ in params)
    fake = use_driver(ParamDriver(sizes, with_count=with_count))
    image = build_cubin({"k": info_records(list(sizes), [a for _, a in params])})
    fn = driver.Module.load(image).function("k")
    assert fn.param_sizes() == sizes and fn.param_sizes() is fn.param_sizes()
    assert fake.info_calls == [] and fake.count_calls == 0


@settings(max_examples=40, deadline=None, suppress_health_check=FIXTURE_OK)
@given(st.lists(st.sampled_from([1, 2, 4, 8, 16, 128]), max_size=10))
def test_a_foreign_image_asks_for_the_count_and_never_past_it(use_driver, sizes) -> None:
    fake = use_driver(ParamDriver(tuple(sizes)))
    fn = driver.Module.load(b"\x7fELF foreign").function("k")
    assert fn.param_sizes() == tuple(sizes)
    assert fake.count_calls == 1 and fake.info_calls == list(range(len(sizes)))


def test_a_cubin_without_the_kernel_falls_back_to_the_count(use_driver) -> None:
    fake = use_driver(ParamDriver((8, 4)))
    module = driver.Module.load(build_cubin({"other": info_records([8])}))
    assert module.function("k").param_sizes() == (8, 4)
    assert module.function("other").param_sizes() == (8,)
    assert fake.count_calls == 1 and fake.info_calls == [0, 1]


@pytest.mark.parametrize(
    "error",
    [RuntimeError("cuFuncGetParamCount not found"), cu.CUresult.CUDA_ERROR_NOT_SUPPORTED],
)
def test_a_failing_count_means_unknown_and_no_probe(use_driver, error) -> None:
    fake = use_driver(ParamDriver((8, 8, 4), count_error=error))
    fn = driver.Module.load(b"\x7fELF foreign").function("k")
    assert fn.param_sizes() is None and fake.info_calls == []
    launchable = ArgPack([PTR, I32])  # nothing to check against: not refused here
    fn.check_args(launchable.pack(0, 0))


def test_mismatched_arguments_are_refused_from_the_cubin_alone(use_driver) -> None:
    fake = use_driver(ParamDriver((8, 8, 8, 4)))
    fn = driver.Module.load(build_cubin({"vadd": info_records([8, 8, 8, 4])})).function("vadd")
    with pytest.raises(
        LaunchError, match=r"4 parameter\(s\) of sizes \[8, 8, 8, 4\].*\(ptr, i32\)"
    ):
        fn.check_args(ArgPack([PTR, I32]).pack(1, 2))
    fn.check_args(ArgPack([PTR, PTR, PTR, I32]).pack(1, 2, 3, 4))
    assert fake.info_calls == [] and fake.count_calls == 0
