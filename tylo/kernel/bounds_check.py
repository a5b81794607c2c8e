"""Bounds guards: the launch conditions of a kernel's guarded accesses, checked before the
driver is called.

A guarded access (:mod:`tylo.kernel.accesses`) leaves conditions over launch values: the
runtime integer parameters, the grid's extents and each pointer argument's *extent*, the
number of elements from its address to the end of the array (:func:`extent_of`). At the
end of a trace they become :class:`BoundsGuard` s, guard expressions
(:mod:`tylo.kernel.guardexpr`) over one vector ``w``:

- ``w[i]``, ``i < n``: the launch value of parameter ``i`` (as for the other guards);
- ``w[n + i]``: the extent of pointer parameter ``i`` (0 for other parameters);
- ``w[2n + a]``: the grid's extent along axis ``a`` (x, y, z).

:func:`make_checker` compiles all of a specialization's guards into one function that the
launcher calls with the grid, the arguments and their values; a failure raises
:class:`~tylo.kernel.errors.OutOfBoundsLaunchError` naming the parameter, the access's
source line, the condition and the values. Guards are stored as data in the disk cache
(:meth:`BoundsGuard.to_data`), like the other launch guards, never as code.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tylo.arrays import DeviceArray as _DeviceArray
from tylo.arrays import DeviceBuffer as _DeviceBuffer
from tylo.kernel.errors import OutOfBoundsLaunchError, TraceError
from tylo.kernel.guardexpr import GuardDataError
from tylo.kernel.guards import Guard

__all__ = ["BoundsGuard", "all_within", "build_guards", "extent_of", "make_checker"]

_AXES = "xyz"


@dataclass(frozen=True)
class BoundsGuard:
    """One guarded access's launch condition: the ``guard`` (text and expression over
    ``w``, see the module docstring), the ``param`` (name) of the array it touches, the
    access's source ``where`` (``file:line``) and text ``access``, and ``names``: each
    launch symbol of the condition with its slot in ``w``, for the error message."""

    guard: Guard
    param: str
    where: str
    access: str
    names: tuple[tuple[str, int], ...]

    def to_data(self) -> list[Any]:
        """JSON-typed data; :meth:`from_data` reads it back (validated, never evaluated)."""
        return [
            self.guard.to_data(),
            self.param,
            self.where,
            self.access,
            [list(n) for n in self.names],
        ]

    @classmethod
    def from_data(cls, data: Any) -> BoundsGuard:
        """The guard :meth:`to_data` wrote; anything else raises
        :class:`~tylo.kernel.guardexpr.GuardDataError`."""
        if type(data) is not list or len(data) != 5:
            raise GuardDataError(f"BoundsGuard.from_data: expected 5 fields, got {data!r:.80}")
        guard, param, where, access, names = data
        if not all(type(x) is str for x in (param, where, access)) or type(names) is not list:
            raise GuardDataError("BoundsGuard.from_data: malformed fields")
        pairs = []
        for n in names:
            if type(n) is not list or len(n) != 2 or type(n[0]) is not str or type(n[1]) is not int:
                raise GuardDataError(f"BoundsGuard.from_data: malformed name {n!r:.80}")
            pairs.append((n[0], n[1]))
        return cls(Guard.from_data(guard), param, where, access, tuple(pairs))


def build_guards(ctx: Any, param_names: Sequence[str]) -> tuple[BoundsGuard, ...]:
    """The :class:`BoundsGuard` s of a finished trace's guarded accesses
    (``ctx.bounds_guards``), over the vector ``w`` of the module docstring."""
    from tylo.kernel.guards import _tree

    n = len(param_names)
    out = []
    for index, array, parts, where, offset in ctx.bounds_guards:
        access = f"{array}[{offset}]"
        mapping: dict[Any, int] = dict(ctx.param_index)
        names: dict[str, int] = {}
        for p in parts:
            for s in p.free_symbols:
                text = str(s)
                if s in ctx.param_index:
                    slot = ctx.param_index[s]
                elif s in ctx.extent_params:
                    slot = n + ctx.extent_params[s]
                elif text.startswith("grid_dim_") and text[-1] in _AXES:
                    slot = 2 * n + _AXES.index(text[-1])
                else:  # accesses.record only guards launch symbols
                    raise TraceError(f"{where}: {access}: {text} is not a launch value")
                mapping[s] = slot
                names[text] = slot
        stub = types.SimpleNamespace(param_index=mapping)
        trees = [_tree(stub, p) for p in parts]  # type: ignore[arg-type]
        tree = trees[0] if len(trees) == 1 else ("and", *trees)
        cond = " and ".join(str(p) for p in parts)
        param = param_names[index] if index is not None else array
        guard = Guard(f"{where}: {access} needs {cond}", tree)
        out.append(BoundsGuard(guard, param, where, access, tuple(sorted(names.items()))))
    return tuple(out)


def extent_of(arg: Any, nbytes: int) -> int:
    """The number of ``nbytes``-byte elements from ``arg``'s address to the end of the
    elements it describes: one past its largest element offset (by shape and strides;
    0 for an empty array), in bytes over ``nbytes``. ``arg`` is anything a pointer
    parameter accepts (a torch tensor, a tylo DeviceBuffer or DeviceArray, an object with
    ``__cuda_array_interface__`` or ``__dlpack__``, a ``tylo.ArraySpec``)."""
    fast = _FAST.get(type(arg))
    if fast is not None:
        return fast(arg, nbytes)
    if isinstance(arg, _DeviceArray):  # a subclass (tylo.ArraySpec)
        return _tylo_array(arg, nbytes)
    numel = getattr(arg, "numel", None)
    if numel is not None and callable(numel) and hasattr(arg, "element_size"):  # torch
        if numel() == 0:
            return 0
        return _span(arg.shape, arg.stride(), arg.element_size(), nbytes)
    from tylo.arrays import as_device_array

    a = as_device_array(arg)
    return _span(a.shape, a.strides, a.dtype.nbytes, nbytes)


def _span(shape: Any, strides: Any, itemsize: int, nbytes: int) -> int:
    last = 0
    for s, st in zip(shape, strides):
        if s == 0:
            return 0
        if st > 0:
            last += (s - 1) * st
    return (last + 1) * itemsize // nbytes


def _tylo_array(arg: Any, nbytes: int) -> int:
    """A DeviceArray, DeviceBuffer or ArraySpec: shape and strides in elements."""
    shape = arg.shape
    if len(shape) == 1:  # the common case, without the loop
        n = shape[0]
        if n == 0:
            return 0
        st = arg.strides[0]
        return ((n - 1) * st + 1 if st > 0 else 1) * arg.dtype.nbytes // nbytes
    return _span(shape, arg.strides, arg.dtype.nbytes, nbytes)


_FAST: dict[type, Any] = {_DeviceArray: _tylo_array, _DeviceBuffer: _tylo_array}


def make_checker(
    kernel: str, bounds: Sequence[BoundsGuard], bindings: Sequence[Any]
) -> Callable[[Any, Sequence[Any], Sequence[Any]], None] | None:
    """``check(dims, args, values)``, raising :class:`OutOfBoundsLaunchError` when a
    launch with launch dimensions ``dims`` (``(gx, gy, gz, bx, by, bz)``, or None where
    the grid is not valid: the launch refuses it) violates a guard; None without guards.
    ``check.passes(dims, args, values)`` is the same test as a bool, for the inline
    launch path."""
    if not bounds:
        return None
    from tylo.kernel.spec import ParamKind

    n = len(bindings)
    pointers = [(i, b.dtype.nbytes) for i, b in enumerate(bindings) if b.kind is ParamKind.POINTER]
    ok = all_within([b.guard.expr for b in bounds], n)

    def vector(dims: Any, args: Sequence[Any], values: Sequence[Any]) -> tuple[Any, ...]:
        extents = [0] * n
        for i, nbytes in pointers:
            extents[i] = extent_of(args[i], nbytes)
        return (*values, *extents, *dims[:3])

    def check(dims: Any, args: Sequence[Any], values: Sequence[Any]) -> None:
        if dims is None:
            return
        w = vector(dims, args, values)
        if not ok(w):
            explain(kernel, bounds, w)

    def passes(dims: Any, args: Sequence[Any], values: Sequence[Any]) -> bool:
        """Whether every guard holds (the inline launch path: False sends the launch to
        the checked path, which raises)."""
        return dims is not None and bool(ok(vector(dims, args, values)))

    check.passes = passes  # type: ignore[attr-defined]
    return check


def all_within(trees: Sequence[Any], n: int) -> Callable[[Sequence[Any]], bool]:
    """One function ``f(w)`` true exactly when every validated guard tree holds on ``w``
    (as :func:`~tylo.kernel.guards.compile_guards` of them), faster for bounds guards:
    the trees ``L <= w[s]`` with ``s`` an extent slot (``n <= s < 2n``) that share their
    left side (the arrays of ``vector_add`` share ``Min(256*grid - 1, n - 1) + 1``)
    compute it once and compare it with each extent; the rest are compiled as they are.
    A division by zero makes ``f`` false, as for the other guards."""
    from tylo.kernel import guardexpr

    groups: dict[Any, list[int]] = {}
    rest = []
    for t in trees:
        if (
            type(t) is tuple
            and t[0] == "<="
            and type(t[2]) is tuple
            and t[2][0] == "v"
            and n <= t[2][1] < 2 * n
        ):
            groups.setdefault(t[1], []).append(t[2][1])
        else:
            rest.append(t)
    sides = []
    for lhs, slots in groups.items():
        kind, x = guardexpr._compile(lhs)
        sides.append((kind, x, tuple(slots)))
    others = guardexpr.compile_all(rest) if rest else None

    def within(w: Sequence[Any]) -> bool:
        try:
            for kind, x, slots in sides:
                v = x if kind == "c" else w[x] if kind == "i" else x(w)
                for s in slots:
                    if not v <= w[s]:
                        return False
        except ZeroDivisionError:
            return False
        return others is None or bool(others(w))

    return within


def explain(kernel: str, bounds: Sequence[BoundsGuard], w: Sequence[Any]) -> None:
    """Raise :class:`OutOfBoundsLaunchError` for the first of ``bounds`` that values ``w``
    violate (nothing when all hold)."""
    for b in bounds:
        if not b.guard.compile()(w):
            values = ", ".join(f"{name} = {w[slot]}" for name, slot in b.names)
            raise OutOfBoundsLaunchError(
                f"{kernel}: argument {b.param!r}: the access {b.access} at {b.where} would "
                f"leave the array: it needs {b.guard.text.split(' needs ', 1)[1]}, but "
                f"{values}; pass a larger array or smaller sizes"
            )
