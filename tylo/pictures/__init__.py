"""tylo.pictures: SVG pictures of layouts, thread-value ownerships, banks and MMA atoms.

Pure Python (stdlib XML text; no plotting library). Every cell of a picture carries its
meaning in ``data-*`` attributes, so pictures can be checked by parsing them. The manual
is ``docs/pictures.md``.

- :func:`layout_svg`: cells labelled and coloured by offset;
- :func:`bank_svg`: a shared-memory layout coloured by bank (4-byte banks, 32 of them);
- :func:`tv_svg` / :func:`ownership_svg`: ``T0V1`` cells (thread and value per element);
- :func:`mma_svg`: an MMA atom's A, B and C ownerships;
- :func:`repr_svg`: what a ``_repr_svg_`` hook returns (None when there is no picture);
- :func:`svg_to_png`: PNG through the optional ``cairosvg`` package.

>>> from tylo.layouts import Layout
>>> layout_svg(Layout((2, 2), (1, 2))).startswith("<svg")
True
"""

from __future__ import annotations

from typing import Any

from tylo.pictures.errors import PictureError
from tylo.pictures.layouts import MAX_CELLS, bank_of, bank_svg, grid_of, layout_svg
from tylo.pictures.ownership import mma_svg, ownership_svg, tv_owner_table, tv_svg
from tylo.pictures.svg import bank_colour, index_colour

__all__ = [
    "MAX_CELLS",
    "PNG_INSTALL_HINT",
    "PictureError",
    "bank_colour",
    "bank_of",
    "bank_svg",
    "grid_of",
    "index_colour",
    "layout_svg",
    "mma_svg",
    "ownership_svg",
    "register_notebook_formatters",
    "repr_svg",
    "svg_to_png",
    "tv_owner_table",
    "tv_svg",
]

PNG_INSTALL_HINT = (
    "PNG output needs the optional package cairosvg (and the Cairo library): "
    "`pip install cairosvg` (or `pip install 'tylo[png]'`); or write SVG (--svg FILE), "
    "which needs nothing"
)


def repr_svg(obj: Any) -> str | None:
    """The picture of ``obj`` for a notebook's ``_repr_svg_``: a static Layout or
    ComposedLayout (:func:`layout_svg`), an Ownership (:func:`ownership_svg`), an MMA atom
    (:func:`mma_svg`); None when there is none (symbolic, too large, another type), so
    the notebook shows the text form instead of an error."""
    from tylo.layouts import ComposedLayout, Layout

    try:
        if isinstance(obj, (Layout, ComposedLayout)):
            return layout_svg(obj) if obj.is_static else None
        if all(hasattr(obj, p) for p in ("a", "b", "c")):
            return mma_svg(obj)
        if hasattr(obj, "tv") and hasattr(obj, "shape"):
            return ownership_svg(obj)
    except PictureError:
        return None
    return None


def svg_to_png(svg: str, path: str) -> None:
    """Write ``svg`` as a PNG file at ``path`` with cairosvg; PictureError (naming what to
    install) when cairosvg or its Cairo library is missing."""
    try:
        import cairosvg  # type: ignore[import-not-found]
    except (ImportError, OSError) as err:  # OSError: the package is there, libcairo is not
        raise PictureError(
            f"svg_to_png: {PNG_INSTALL_HINT} ({type(err).__name__}: {err})"
        ) from None
    cairosvg.svg2png(bytestring=svg.encode(), write_to=str(path))


def register_notebook_formatters() -> bool:
    """Show layouts as pictures in IPython/Jupyter: registers :func:`repr_svg` as the
    ``image/svg+xml`` formatter of ``Layout`` and ``ComposedLayout`` (which live below this
    package in ``tylo.layouts`` and do not import it; ``Ownership`` and the MMA atoms carry
    their own ``_repr_svg_``). Runs when this package is imported; True when a running
    IPython took the formatters."""
    try:
        from IPython import get_ipython  # type: ignore[import-not-found]
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None:
        return False
    from tylo.layouts import ComposedLayout, Layout

    formatter = shell.display_formatter.formatters["image/svg+xml"]
    for cls in (Layout, ComposedLayout):
        formatter.for_type(cls, repr_svg)
    return True


register_notebook_formatters()
