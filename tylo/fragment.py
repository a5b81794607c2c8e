"""Moved to :mod:`tylo.tile.fragment`; a deprecated alias until tylo 0.2 (:mod:`tylo._moved`)."""

from tylo._moved import alias

alias(__name__, "tylo.tile.fragment")
