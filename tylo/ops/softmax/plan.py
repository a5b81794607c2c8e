"""Host planning for the softmax kernels: the static configuration and its ownerships.

A :class:`SoftmaxConfig` is the frozen, hashable static argument of every softmax kernel. It
names the *ownership style* and the numbers that fix the register tile:

- ``lane``: each thread owns whole short rows (``vec * chunks`` columns of one row); the
  row reductions happen inside the thread, with no communication at all;
- ``warp``: ``threads_per_row`` threads (lanes of a warp, or several warps) share a row,
  each holding ``chunks`` vectors of ``vec`` consecutive elements strided
  ``threads_per_row * vec`` apart (coalesced 16-byte accesses); the reductions fold in the
  thread, then butterfly shuffles over the lanes, then (several warps) a shared-memory
  exchange. ``passes=1`` keeps the whole row in registers (read once, write once), and
  ``prefetch`` adds a persistent grid that streams each block's next ``stages - 1`` rows
  into shared memory meanwhile; ``passes=2`` is the online variant for rows that do not
  fit: one streaming pass for the running maximum and sum, one pass that normalizes;
- ``mma``: the accumulator layout of ``mma.sync.m16n8k16`` (each row's values spread over
  the 4 lanes of a quad), as attention holds its scores; rows are swept in tiles of
  ``8 * repeat_n`` columns with an online maximum and sum carried between tiles.

:func:`choose_config` picks the style and the numbers for a shape; :func:`make_config`
builds a specific one. Every check of user input raises :class:`SoftmaxError` before
anything is compiled or launched.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import tylo
from tylo.errors import TyloError
from tylo.nvgpu.warp.mma import MMAAtom, TiledMMA
from tylo.target import Target, TargetError
from tylo.tile.ownership import Ownership

__all__ = [
    "DTYPES",
    "MASKS",
    "MAX_VALUES",
    "PREFETCH_MIN_CC",
    "PREFETCH_SHARED",
    "SMS",
    "STYLES",
    "SoftmaxConfig",
    "SoftmaxError",
    "choose_config",
    "make_config",
    "prefetch_bytes",
    "shared_capacity",
    "vector_width",
]

STYLES = ("lane", "warp", "mma")
MASKS = ("none", "length", "bool")
DTYPES = ("f32", "bf16")
WARP = 32  # threads per warp
SMS = 132  # streaming multiprocessors of the H200 (the grid heuristics' default)
MAX_VALUES = 32  # f32 values a thread keeps of one row (registers: about 2x this in all)
LANE_MAX_COLS = 16  # longest row the lane style takes when the style is picked for you
_BLOCK_LANE = 128  # threads per block of the lane style (one row each)
PREFETCH_SHARED = 200 * 1024  # shared bytes a prefetching block may take (227 KB per SM)
# ptxas for sm_80 duplicates the prefetch loop's body for warps it cannot prove converged
# at the shuffles (BRA.DIV) and spills at the 64 registers a 1024-thread block allows; the
# sm_90 compiler does not, so prefetching is a Hopper-and-newer choice
PREFETCH_MIN_CC = (9, 0)


class SoftmaxError(TyloError, ValueError):
    """Softmax arguments or a configuration that cannot be used (raised before launch)."""


@dataclass(frozen=True)
class SoftmaxConfig:
    """The static configuration of one softmax kernel (see the module docstring).

    ``vec``: elements per vector access (16 bytes of the input when the rows allow);
    ``chunks``: vectors per thread per row (``warp``, ``lane``) or per column tile
    (``passes=2``); ``threads_per_row`` / ``rows_per_block``: the block's shape (``warp``);
    ``repeat_n``:
    MMA atoms along a row (``mma``: a column tile of ``8 * repeat_n``); ``warps``: warps per
    block (``mma``); ``mask``: 'none', 'length' (a valid length per row) or 'bool' (a
    boolean array, True keeps); ``full``: the row length equals the register tile's (no
    column guards); ``load_cache`` / ``store_cache``: PTX cache qualifiers of the input
    loads and output stores; ``prefetch``: the persistent kernel that copies the next
    ``stages - 1`` rows into shared memory while normalizing one (``warp``, one pass, one
    row per block, sm_90 and newer).
    """

    style: str
    vec: int = 4
    chunks: int = 8
    threads_per_row: int = 32
    rows_per_block: int = 8
    passes: int = 1
    mask: str = "none"
    full: bool = False
    repeat_n: int = 8
    warps: int = 4
    load_cache: str | None = None
    store_cache: str | None = None
    prefetch: bool = False
    stages: int = 3

    def __post_init__(self) -> None:
        if self.style not in STYLES:
            raise SoftmaxError(f"softmax: style must be one of {STYLES}, got {self.style!r}")
        if self.mask not in MASKS:
            raise SoftmaxError(f"softmax: mask must be one of {MASKS}, got {self.mask!r}")
        for name in (
            "vec",
            "chunks",
            "threads_per_row",
            "rows_per_block",
            "repeat_n",
            "warps",
            "stages",
        ):
            v = getattr(self, name)
            if type(v) is not int or v < 1:
                raise SoftmaxError(f"SoftmaxConfig: {name} must be a positive int, got {v!r}")
        if self.vec not in (1, 2, 4, 8):
            raise SoftmaxError(f"SoftmaxConfig: vec must be 1, 2, 4 or 8, got {self.vec}")
        if self.passes not in (1, 2):
            raise SoftmaxError(f"SoftmaxConfig: passes must be 1 or 2, got {self.passes!r}")
        if self.threads > 1024:
            raise SoftmaxError(
                f"SoftmaxConfig: {self.threads} threads per block; a block holds at most 1024"
            )
        t = self.threads_per_row
        if self.style == "warp" and (t < 2 or t & (t - 1)):
            raise SoftmaxError(
                "SoftmaxConfig: threads_per_row must be a power of two >= 2 (lanes of one "
                f"warp, or whole warps), got {t}"
            )
        if self.prefetch and (self.style != "warp" or self.passes != 1 or self.rows_per_block != 1):
            raise SoftmaxError(
                "SoftmaxConfig: prefetch (the next row streamed into shared memory) is for "
                "one-pass warp-striped rows, one row per block"
            )
        if self.style == "mma" and self.vec != 2:
            raise SoftmaxError("SoftmaxConfig: the mma style moves element pairs (vec=2)")

    # -- shape of the work ---------------------------------------------------------------

    @property
    def threads(self) -> int:
        """Threads per block."""
        if self.style == "lane":
            return self.rows_per_block
        if self.style == "mma":
            return WARP * self.warps
        return self.threads_per_row * self.rows_per_block

    @property
    def row_threads(self) -> int:
        """Threads sharing one row."""
        return {"lane": 1, "warp": self.threads_per_row, "mma": 4}[self.style]

    @property
    def block_rows(self) -> int:
        """Rows one block handles."""
        return 16 * self.warps if self.style == "mma" else self.rows_per_block

    @property
    def tile_cols(self) -> int:
        """Columns of the register tile (one pass holds a row of at most this many)."""
        if self.style == "mma":
            return 8 * self.repeat_n
        return self.row_threads * self.vec * self.chunks

    def grid(self, rows: int) -> int:
        """Blocks for ``rows`` rows."""
        return -(-rows // self.block_rows)

    def fits(self, cols: int) -> bool:
        """Whether rows of ``cols`` can use this configuration."""
        if self.passes == 1 and cols > self.tile_cols:
            return False
        if self.full and cols != self.tile_cols:
            return False
        return cols % self.vec == 0

    # -- ownerships ----------------------------------------------------------------------

    @property
    def ownership(self) -> Ownership:
        """Who holds which element of the block's register tile ``(block_rows,
        tile_cols)``: thread modes first (lanes, then rows), value modes (the vector, then
        the chunks) after; see the module docstring for each style."""
        v, k = self.vec, self.chunks
        if self.style == "lane":
            return Ownership.from_modes(
                (self.rows_per_block, self.tile_cols),
                [(self.rows_per_block, 0, 1)],
                [(v, 1, 1), (k, 1, v)],
                name=f"lane rows ({self.rows_per_block} x {self.tile_cols})",
            )
        if self.style == "warp":
            t = self.row_threads
            return Ownership.from_modes(
                (self.rows_per_block, self.tile_cols),
                [(t, 1, v), (self.rows_per_block, 0, 1)],
                [(v, 1, 1), (k, 1, t * v)],
                name=f"warp-striped rows ({self.rows_per_block} x {self.tile_cols})",
            )
        return self.mma_plan.acc_ownership

    @property
    def mma_plan(self) -> TiledMMA:
        """The MMA plan whose accumulator ownership the ``mma`` style uses: ``warps``
        warps stacked along the rows, ``repeat_n`` atoms along a row."""
        return TiledMMA(
            MMAAtom((16, 8, 16), tylo.bf16), warps=(self.warps, 1), repeat=(1, self.repeat_n)
        )

    @property
    def local_ownership(self) -> Ownership:
        """The registers of :attr:`ownership` seen as ``(threads, values)``: each
        thread's values form its own row, so a reduction along axis 1 stays in the thread
        (no shuffles). The online variant folds each column tile this way."""
        own = self.ownership
        return Ownership.from_modes(
            (own.threads, own.values),
            [(own.threads, 0, 1)],
            [(own.values, 1, 1)],
            name="each thread's values",
        )

    @property
    def thread_ownership(self) -> Ownership:
        """One value per thread over ``(block_rows, row_threads)``: thread ``t`` holds
        column ``t % row_threads`` of its row. The online variant keeps each thread's
        running maximum and sum in this ownership, so the final reductions along axis 1
        combine the threads of a row (shuffles, and shared memory across warps)."""
        t = self.row_threads
        return Ownership.from_modes(
            (self.rows_per_block, t),
            [(t, 1, 1), (self.rows_per_block, 0, 1)],
            [],
            name="per thread",
        )

    @property
    def row_warps(self) -> int:
        """Warps sharing one row (1: the row's lanes are within one warp)."""
        return max(1, self.row_threads // WARP)

    def describe(self) -> str:
        """One line for logs and tables."""
        if self.style == "mma":
            shape = f"{self.warps} warps x m16n8 C tiles, {self.tile_cols}-column tiles"
        elif self.style == "lane":
            shape = f"{self.rows_per_block} rows/block, 1 thread/row"
        else:
            shape = f"{self.threads_per_row} threads/row, {self.rows_per_block} row(s)/block"
        cache = ""
        if self.load_cache or self.store_cache:
            cache = f", ld.{self.load_cache or '-'}/st.{self.store_cache or '-'}"
        return (
            f"{self.style}: {shape}, vec {self.vec} x {self.chunks}, "
            f"{'one pass' if self.passes == 1 else 'online two-pass'}, mask {self.mask}"
            f"{', full rows' if self.full else ''}"
            f"{', next row prefetched' if self.prefetch else ''}"
            f"{cache}"
        )


def vector_width(itemsize: int, cols: int, strides_ok: bool) -> int:
    """Elements per vector access: 16 bytes of ``itemsize``-byte elements when every row
    starts 16-byte aligned (``strides_ok``), halved until it divides the row length."""
    vec = 16 // itemsize if strides_ok else 1
    while vec > 1 and cols % vec:
        vec //= 2
    return vec


def make_config(
    style: str,
    cols: int,
    *,
    vec: int,
    mask: str = "none",
    threads_per_row: int | None = None,
    rows_per_block: int | None = None,
    passes: int | None = None,
    **extra: Any,
) -> SoftmaxConfig:
    """The configuration of ``style`` for rows of ``cols`` elements accessed ``vec`` at a
    time (see :func:`vector_width`); the other arguments override the defaults."""
    if type(cols) is not int or cols < 1:
        raise SoftmaxError(f"softmax: rows must have at least one element, got cols={cols!r}")
    if type(vec) is not int or vec < 1 or vec & (vec - 1):
        raise SoftmaxError(f"softmax: vec must be a power of two >= 1, got {vec!r}")
    if style == "mma":
        repeat_n = extra.pop("repeat_n", 8)
        if vec < 2:
            raise SoftmaxError(
                "softmax: the mma style loads element pairs, so it needs an even row length "
                f"and rows that start at even elements (cols={cols}); use style 'warp'"
            )
        tile = 8 * repeat_n
        return SoftmaxConfig(
            "mma",
            vec=2,
            chunks=1,
            repeat_n=repeat_n,
            mask=mask,
            full=cols == tile,
            passes=1 if cols <= tile else 2,
            **extra,
        )
    if style == "lane":
        k = -(-cols // vec)
        if vec * k > 4 * MAX_VALUES:
            raise SoftmaxError(
                f"softmax: the lane style keeps a whole row in one thread; {cols} columns "
                f"are too many (at most {4 * MAX_VALUES}); use style 'warp'"
            )
        return SoftmaxConfig(
            "lane",
            vec=vec,
            chunks=k,
            rows_per_block=rows_per_block or _BLOCK_LANE,
            mask=mask,
            full=vec * k == cols,
            **extra,
        )
    if style != "warp":
        raise SoftmaxError(f"softmax: style must be one of {STYLES}, got {style!r}")
    if threads_per_row is None:
        # enough threads that each holds at most MAX_VALUES of the row, and (rows of that
        # many vectors) at least 8 lanes per row: 128 bytes per row and access
        most = _pow2_ceil(-(-cols // MAX_VALUES))
        spread = min(WARP, _pow2_ceil(-(-cols // vec)))
        threads_per_row = min(1024, max(2, most, spread))
    t = threads_per_row
    if passes is None:
        passes = 1 if cols <= t * MAX_VALUES else 2
    per_tile = -(-cols // (t * vec))  # vectors per thread to cover the row in one tile
    k = per_tile if passes == 1 else max(1, min(MAX_VALUES // vec, per_tile))
    if rows_per_block is None:
        rows_per_block = max(1, 256 // t)
    return SoftmaxConfig(
        "warp",
        vec=vec,
        chunks=k,
        threads_per_row=t,
        rows_per_block=rows_per_block,
        passes=passes,
        mask=mask,
        full=passes == 1 and t * vec * k == cols,
        **extra,
    )


def _pow2_ceil(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def choose_config(
    rows: int,
    cols: int,
    *,
    vec: int,
    itemsize: int = 4,
    mask: str = "none",
    style: str | None = None,
    cc: tuple[int, int] = (9, 0),
) -> SoftmaxConfig:
    """The configuration for a shape: ``style`` if given, else the best one for the row
    length (lane-local rows up to :data:`LANE_MAX_COLS` elements, warp-striped rows
    otherwise: one pass up to ``32 * 32 * MAX_VALUES`` = 32,768 elements, online above).
    Rows that take a whole 1024-thread block and whose two copies fit in shared memory
    (16-bit elements) stream the next row in while normalizing one (``prefetch``; compute
    capability ``cc`` 9.0 or newer, see :data:`PREFETCH_MIN_CC`)."""
    if type(rows) is not int or rows < 0:
        raise SoftmaxError(f"softmax: rows must be an int >= 0, got {rows!r}")
    if type(cols) is not int or cols < 1:
        raise SoftmaxError(f"softmax: rows must have at least one element, got cols={cols!r}")
    if type(itemsize) is not int or itemsize not in (1, 2, 4, 8):
        raise SoftmaxError(f"softmax: itemsize must be 1, 2, 4 or 8 bytes, got {itemsize!r}")
    if not (isinstance(cc, tuple) and len(cc) == 2 and all(type(c) is int for c in cc)):
        raise SoftmaxError(f"softmax: cc must be a (major, minor) pair of ints, got {cc!r}")
    if style is None:
        style = "lane" if cols <= LANE_MAX_COLS else "warp"
    cfg = make_config(style, cols, vec=vec, mask=mask)
    if (
        cfg.style == "warp"
        and cfg.passes == 1
        and cfg.threads_per_row == 1024
        and prefetch_bytes(cfg, itemsize) <= PREFETCH_SHARED
        and rows > 1
        and tuple(cc) >= PREFETCH_MIN_CC
        and prefetch_bytes(cfg, itemsize) <= shared_capacity(cc)
        and vec * itemsize == 16
    ):
        cfg = dataclasses.replace(cfg, prefetch=True)
    return cfg


def shared_capacity(cc: tuple[int, int]) -> int:
    """The shared memory a block may use on compute capability ``cc``
    (:attr:`tylo.target.Target.max_shared_bytes`; 0 for one tylo has no figure for)."""
    try:
        return Target(*cc).max_shared_bytes
    except TargetError:
        return 0


def prefetch_bytes(cfg: SoftmaxConfig, itemsize: int) -> int:
    """Dynamic shared memory of a ``prefetch`` launch: ``stages`` rows."""
    return cfg.stages * cfg.tile_cols * itemsize
