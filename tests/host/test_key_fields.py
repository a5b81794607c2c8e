"""The first-level specialization key changes exactly when one of its inputs does, for every
input (no libNVVM, no GPU).

:func:`tylo.kernel.diskcache.specialization_key` digests 15 fields. For each field there is
a *variant* below that changes that one input and nothing else: the format, the kernel's
name, its file, its code, ``index_bits``, the bounds-debug mode, the compile options, the
block, the target, each kind of binding (dtype, pointer alignment, static value), the
closure, tylo's own sources, the toolchain, the Python version and the cluster shape
(absent, a shape, a shape carried in the PTX). The properties:

- the key of no change is the base key, every time;
- every variant alone, and every pair of variants, gives a key unlike the base's and unlike
  every other combination's (a field left out of the digest makes its variant collide with
  the base; one field masking another makes a pair collide);
- the fields the digest reads are exactly the fields the variants cover (a field added to
  the key without a variant here fails the test until one is written).
"""

from __future__ import annotations

import hashlib
import itertools
import sys
import types

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tylo
from tylo.backend.pipeline import CompileOptions
from tylo.kernel import clusters, diskcache
from tylo.target import Target


def _make(scale):
    def keyed(out, x, n: int, mode: tylo.Static):
        out[0] = scale + 0

    return keyed


BASE_FN = _make(2.0)
OTHER_FILE = tylo.__file__  # any existing source file


def _refunction(fn, *, code=None, name=None, closure=None):
    new = types.FunctionType(
        code or fn.__code__, fn.__globals__, name or fn.__name__, fn.__defaults__,
        closure if closure is not None else fn.__closure__,
    )  # fmt: skip
    new.__qualname__ = name or fn.__qualname__
    new.__module__ = fn.__module__
    new.__annotations__ = dict(fn.__annotations__)
    return new


def _other_code(fn):
    consts = tuple(1 if c == 0 and type(c) is int else c for c in fn.__code__.co_consts)
    assert consts != fn.__code__.co_consts
    return _refunction(fn, code=fn.__code__.replace(co_consts=consts))


def _other_closure(fn):
    return _refunction(fn, closure=_make(3.0).__closure__)


BASE = {
    "fn": BASE_FN,
    "kernel": {},
    "specs": (tylo.f32, tylo.f32, int, "a"),
    "block": (32, 1, 1),
    "target": "sm_90a",
    "cluster": None,
}

# field of the digest -> a change of that input alone (on a copy of BASE; may monkeypatch)
VARIANTS = {
    "format": lambda c, mp: mp.setattr(diskcache, "FORMAT", diskcache.FORMAT + "-other"),
    "kernel": lambda c, mp: c.update(fn=_refunction(c["fn"], name="renamed")),
    "file": lambda c, mp: c.update(
        fn=_refunction(c["fn"], code=c["fn"].__code__.replace(co_filename=OTHER_FILE))
    ),
    "code": lambda c, mp: c.update(fn=_other_code(c["fn"])),
    "index_bits": lambda c, mp: c["kernel"].update(index_bits=32),
    "debug": lambda c, mp: mp.setenv("TYLO_DEBUG_BOUNDS", "1"),
    "options": lambda c, mp: c["kernel"].update(options=CompileOptions(max_registers=128)),
    "bounds": lambda c, mp: c["kernel"].update(bounds="off"),
    "block": lambda c, mp: c.update(block=(64, 1, 1)),
    "target": lambda c, mp: c.update(target="sm_80"),
    "bindings.dtype": lambda c, mp: c.update(specs=(tylo.f16, *c["specs"][1:])),
    "bindings.align": lambda c, mp: c.update(
        specs=(c["specs"][0], tylo.pointer(tylo.f32, align=16), *c["specs"][2:])
    ),
    "bindings.static": lambda c, mp: c.update(specs=(*c["specs"][:3], "b")),
    "closure": lambda c, mp: c.update(fn=_other_closure(c["fn"])),
    "tylo": lambda c, mp: mp.setattr(diskcache, "tylo_identity", lambda: "another tylo"),
    "toolchain": lambda c, mp: mp.setattr(diskcache, "toolchain_identity", lambda: "other"),
    "python": lambda c, mp: mp.setattr(sys, "version", "3.99.0 (a different Python)"),
    "cluster": lambda c, mp: c.update(cluster=(2, 1, 1)),
    "cluster.ptx": lambda c, mp: (  # (4, 1, 1) alone; with "cluster", its (2, 1, 1)
        c.update(cluster=c["cluster"] or (4, 1, 1)),
        mp.setattr(clusters, "SHAPE_IN_PTX", True),
    ),
}


def key_of(names: tuple[str, ...]) -> str:
    """The key with the variants ``names`` applied (each once, in this order)."""
    case = {k: (dict(v) if isinstance(v, dict) else v) for k, v in BASE.items()}
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("TYLO_DEBUG_BOUNDS", raising=False)
        for name in names:
            VARIANTS[name](case, mp)
        kern = tylo.kernel(case["fn"], **case["kernel"])
        bindings = kern._spec_bindings(case["specs"], {})
        cluster = case["cluster"]
        return diskcache.specialization_key(
            kern, bindings, case["block"], Target.parse(case["target"]), cluster
        )


def test_no_change_is_the_same_key():
    base = key_of(())
    assert base is not None
    assert all(key_of(()) == base for _ in range(3))


def test_every_field_and_every_pair_of_fields_changes_the_key():
    seen: dict[str, tuple] = {}
    combos = [()] + [(n,) for n in VARIANTS] + list(itertools.combinations(VARIANTS, 2))
    for names in combos:
        key = key_of(names)
        assert key is not None, names
        assert key not in seen, f"{names} gives the same key as {seen.get(key)}"
        seen[key] = names


def test_the_variants_cover_every_field_the_digest_reads(monkeypatch):
    fed: list[str] = []

    class Recorder:
        def __init__(self):
            self.inner = hashlib.sha256()

        def update(self, data):
            fed.append(data.split(b"=", 1)[0].decode())
            self.inner.update(data)

        def hexdigest(self):
            return self.inner.hexdigest()

    fake = types.SimpleNamespace(sha256=Recorder)
    monkeypatch.setattr(diskcache, "hashlib", fake)
    key_of(("cluster",))
    covered = {name.split(".")[0] for name in VARIANTS}
    assert set(fed) == covered, set(fed) ^ covered


def test_a_static_value_without_a_stable_text_has_no_key():
    case = dict(BASE, specs=(*BASE["specs"][:3], object()))
    kern = tylo.kernel(case["fn"])
    bindings = kern._spec_bindings(case["specs"], {})
    assert diskcache.specialization_key(kern, bindings, (32, 1, 1), Target.parse("sm_90a")) is None


# ------------------------------------------------- tylo.arrays.array_key of a torch tensor


class _Device:
    def __init__(self, kind, index):
        self.type, self.index = kind, index


class _Torch:
    """Stands in for a torch tensor (array_key reads torch tensors by module name)."""

    __module__ = "torch"

    def __init__(self, ptr, dtype, shape, stride, kind, index):
        self._ptr, self.dtype, self.shape, self._stride = ptr, dtype, shape, stride
        self.device = _Device(kind, index)

    def data_ptr(self):
        return self._ptr

    def stride(self):
        return self._stride


_TORCH_FIELDS = st.tuples(
    st.sampled_from([1 << 20, (1 << 20) + 256]),
    st.sampled_from(["torch.bfloat16", "torch.float16"]),
    st.sampled_from([(4, 8), (8, 4)]),
    st.sampled_from([(8, 1), (1, 4)]),
    st.sampled_from(["cuda", "cpu"]),
    st.sampled_from([0, 1]),
)


@settings(max_examples=150, deadline=None)
@given(a=_TORCH_FIELDS, b=_TORCH_FIELDS)
def test_torch_array_keys_are_equal_exactly_when_every_field_is(a, b):
    """Each of the six fields (address, dtype, shape, strides, device type, device index)
    takes two values, so every field is varied; keys are equal iff all six are."""
    from tylo.arrays import array_key

    assert (array_key(_Torch(*a)) == array_key(_Torch(*b))) == (a == b)


def test_every_torch_field_alone_changes_the_key():
    from tylo.arrays import array_key

    base = (1 << 20, "torch.bfloat16", (4, 8), (8, 1), "cuda", 0)
    other = ((1 << 20) + 256, "torch.float16", (8, 4), (1, 4), "cpu", 1)
    for i in range(6):
        changed = base[:i] + (other[i],) + base[i + 1 :]
        assert array_key(_Torch(*changed)) != array_key(_Torch(*base)), i
