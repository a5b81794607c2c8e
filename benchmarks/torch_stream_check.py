"""What finding torch's current stream costs a launch (``tylo/kernel/torch_streams.py``).

    PYTHONPATH=$PWD python3 benchmarks/torch_stream_check.py

Times, per launch, the check a launcher makes when it is given no stream: before any torch
tensor reached a kernel (one list lookup), after (one type test per argument up to the first
tensor, then torch's raw current-stream query), and with twelve arguments none of which is a
tensor. Needs torch (a CUDA device for the raw stream query). Prints nanoseconds per launch
(best of 7 repeats of 200,000 calls each)."""

from __future__ import annotations

import sys
import timeit


def main() -> int:
    try:
        import torch
    except ImportError:
        print("benchmarks/torch_stream_check.py needs torch", file=sys.stderr)
        return 2
    from tylo.kernel import torch_streams as ts

    device = "cuda" if torch.cuda.is_available() else "cpu"
    t = torch.empty(4, device=device)
    plain = tuple(range(12))
    first = (t, *range(11))
    last = (*range(11), t)
    n = 200_000
    seen_before = ts.SEEN[0]

    def per_call(stmt, glob) -> float:
        return min(timeit.repeat(stmt, globals=glob, number=n, repeat=7)) / n * 1e9

    rows = [
        (
            "no torch tensor seen yet (the flag alone)",
            per_call("s is None and SEEN[0]", {"s": None, "SEEN": [False]}),
        )
    ]
    ts.note_type(type(t))
    g = {"f": ts.torch_stream, "a": plain, "b": first, "c": last}
    rows.append(("12 arguments, none a tensor", per_call("f(a, None)", g)))
    if device == "cuda":
        rows.append(("a tensor first of 12 (with the stream query)", per_call("f(b, None)", g)))
        rows.append(("a tensor last of 12 (with the stream query)", per_call("f(c, None)", g)))
    ts.SEEN[0] = seen_before
    print(f"torch {torch.__version__}, Python {sys.version.split()[0]}, device {device}")
    for what, ns in rows:
        print(f"{ns:8.1f} ns  {what}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
