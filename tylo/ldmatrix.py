"""Moved to :mod:`tylo.nvgpu.warp.ldmatrix`; a deprecated alias until tylo 0.2
(:mod:`tylo._moved`)."""

from tylo._moved import alias

alias(__name__, "tylo.nvgpu.warp.ldmatrix")
