"""The Hopper GEMM: TMA into a multi-stage shared ring, wgmma consumers, warp-specialized."""
