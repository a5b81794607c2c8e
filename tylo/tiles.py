"""Moved to :mod:`tylo.tile.access`; a deprecated alias until tylo 0.2 (:mod:`tylo._moved`)."""

from tylo._moved import alias

alias(__name__, "tylo.tile.access")
