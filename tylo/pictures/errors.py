"""The error a picture raises when it cannot draw what it was given."""

from __future__ import annotations

from tylo.errors import TyloError

__all__ = ["PictureError"]


class PictureError(TyloError):
    """A picture of something that cannot be drawn: a symbolic layout, a layout too
    large to show, an object that is not a layout or an ownership, a bad element size."""
