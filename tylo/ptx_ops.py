"""Moved to :mod:`tylo.nvgpu.instructions`; a deprecated alias until tylo 0.2
(:mod:`tylo._moved`)."""

from tylo._moved import alias

alias(__name__, "tylo.nvgpu.instructions")
