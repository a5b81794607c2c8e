# TEST_TARGET: cc>=8.0
"""The kernel language's basics on the GPU against numpy (tylo issue 15, item 4): concurrent
atomics (histograms in global and shared memory, min/max, exch and cas as permutations),
tylo.print_ output captured from a subprocess, local arrays with static and runtime
indices, and the bounds-debug mode trapping on a deliberate out-of-bounds index with its
message (in a subprocess: a trap ends the CUDA context).

Each kernel also compiles without a GPU (the assembly tests are in
tests/nvvm/test_kernel_basics_sass.py); the runtime halves use ``gpu_runtime``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import tylo
from tylo.arrays import DeviceBuffer

ROOT = Path(__file__).resolve().parents[2]
U32, I32, I64, F32, F64 = tylo.u32, tylo.i32, tylo.i64, tylo.f32, tylo.f64


# the interpreter tier (tests/interp_tier.py) runs one of the atomic ops' tests: 50000 threads
# on one address take about 5 s there
INTERPRETED_ATOMICS = {("cas", np.uint64)}


def dev(a: np.ndarray) -> DeviceBuffer:
    return DeviceBuffer.from_numpy(a)


def host(buf: DeviceBuffer) -> np.ndarray:
    from tylo.backend import driver

    driver.synchronize()
    return buf.to_numpy()


# ---------------------------------------------------------------------------- atomics


@tylo.kernel
def histogram(bins, x, n, nbins: tylo.Static, space: tylo.Static):
    t = tylo.thread_idx.x
    i = tylo.block_idx.x * tylo.block_dim.x + t
    if space == "shared":
        s = tylo.shared(tylo.u32, nbins)
        for k in range(0, nbins, 256):
            if k + t < nbins:
                s[k + t] = 0
        tylo.sync_threads()
        if i < n:
            tylo.atomic_add(s, x[i], 1, scope="cta", result=False)
        tylo.sync_threads()
        for k in range(0, nbins, 256):
            if k + t < nbins:
                tylo.atomic_add(bins, k + t, s[k + t], result=False)
    elif i < n:
        tylo.atomic_add(bins, x[i], 1, result=False)


@pytest.mark.interpret(when=lambda space, n, nbins: n <= 4097)
@pytest.mark.parametrize("space", ["global", "shared"])
@pytest.mark.parametrize(("n", "nbins"), [(1, 16), (100_003, 16), (1 << 20, 1000), (4097, 1)])
def test_concurrent_histogram(gpu_runtime, space, n, nbins):
    rng = np.random.default_rng(n + nbins)
    # skewed data: many threads of a warp hit the same bin at once
    x = (rng.zipf(1.5, n) % nbins).astype(np.uint32)
    bins = dev(np.zeros(nbins, np.uint32))
    histogram[(n + 255) // 256, 256](bins, dev(x), n, nbins, space)
    np.testing.assert_array_equal(host(bins), np.bincount(x, minlength=nbins))


@tylo.kernel
def old_values(out, olds, vals, n, op: tylo.Static):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        v = vals[i]
        if op == "min":
            olds[i] = tylo.atomic_min(out, 0, v)
        if op == "max":
            olds[i] = tylo.atomic_max(out, 0, v, order="acq_rel")
        if op == "exch":
            olds[i] = tylo.atomic_exch(out, 0, v, scope="sys")
        if op == "cas":
            olds[i] = tylo.atomic_cas(out, 0, 0, v)
        if op == "add":
            olds[i] = tylo.atomic_add(out, 0, v, order="acquire")


@pytest.mark.interpret(when=lambda op, dtype: (op, dtype) in INTERPRETED_ATOMICS)
@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.uint64])
@pytest.mark.parametrize("op", ["min", "max", "exch", "cas", "add"])
def test_atomic_old_values(gpu_runtime, op, dtype):
    """Each op's defining property over 50k concurrent threads, brute force."""
    n = 50_000
    rng = np.random.default_rng(7)
    info = np.iinfo(dtype)
    if op in ("exch", "cas"):
        vals = rng.permutation(np.arange(1, n + 1)).astype(dtype)  # distinct, non-zero
    elif op == "add":
        vals = rng.integers(0, 1000, n).astype(dtype)
    else:
        vals = rng.integers(max(info.min, -(2**62)), min(info.max, 2**62), n, dtype=dtype)
    start = np.zeros(1, dtype)
    out, olds = dev(start), dev(np.zeros(n, dtype))
    old_values[(n + 255) // 256, 256](out, olds, dev(vals), n, op)
    final, got = host(out)[0], host(olds)
    if op == "min":
        assert final == min(0, vals.min()) and np.all(got >= final)
    elif op == "max":
        assert final == max(0, vals.max()) and np.all(got <= final)
    elif op == "exch":  # every value is returned once or left in memory: a permutation
        assert sorted([*got.tolist(), int(final)]) == [0, *range(1, n + 1)]
    elif op == "cas":  # exactly one thread swapped 0 for its value; all others saw it
        winners = np.flatnonzero(got == 0)
        assert len(winners) == 1 and final == vals[winners[0]]
        assert np.all(np.delete(got, winners) == final)
    else:  # add: the old values are the distinct prefix sums of some order
        total = int(vals.sum())
        assert int(final) == total
        order = np.lexsort((vals, got))  # by old value; a zero added ties before the rest
        np.testing.assert_array_equal(got[order], np.cumsum(vals[order]) - vals[order])


@tylo.kernel
def float_sums(fsum, dsum, x, n):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        tylo.atomic_add(fsum, i % 7, x[i])
        tylo.atomic_add(dsum, i % 7, x[i].to(tylo.f64), result=False)


@pytest.mark.interpret(
    skip="200003 threads adding into 7 addresses: too slow for the interpreter tier"
)
def test_float_atomic_add(gpu_runtime):
    n = 200_003
    x = np.random.default_rng(3).random(n, dtype=np.float32)
    f, d = dev(np.zeros(7, np.float32)), dev(np.zeros(7, np.float64))
    float_sums[(n + 255) // 256, 256](f, d, dev(x), n)
    want = np.array([x[k::7].astype(np.float64).sum() for k in range(7)])
    np.testing.assert_allclose(host(d), want, rtol=1e-12)
    np.testing.assert_allclose(host(f), want, rtol=1e-3)  # f32 sums in any order


@tylo.kernel
def half_counts(bins, n):
    i = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    if i < n:
        tylo.atomic_add(bins, i % 7, tylo.value(1.0, bins.dtype), result=False)


@pytest.mark.interpret(target="sm_90a")  # bf16 atomics need sm_90
@pytest.mark.parametrize(("dtype", "per_bin"), [(tylo.f16, 2048), (tylo.bf16, 256)])
def test_half_precision_atomic_add(gpu_runtime, dtype, per_bin):
    """Counts up to the largest exactly representable run of integers (2048 in f16, 256 in
    bf16), so the result is exact whatever the order."""
    if dtype is tylo.bf16 and gpu_runtime.major < 9:
        pytest.skip(f"bf16 atomics need sm_90 (found: {gpu_runtime})")
    n = 7 * per_bin
    bins = DeviceBuffer.from_numpy(np.zeros(7, np.uint16), dtype=dtype)
    half_counts[(n + 255) // 256, 256](bins, n)
    got = host(bins).view(np.uint16) if dtype is tylo.bf16 else host(bins)
    if dtype is tylo.bf16:  # bf16 is the upper half of an f32
        got = (got.astype(np.uint32) << 16).view(np.float32)
    np.testing.assert_array_equal(np.asarray(got, np.float32), np.full(7, per_bin, np.float32))


# ---------------------------------------------------------------------------- local arrays


@tylo.kernel
def stencil(out, x, j: tylo.Int(min=0), runtime_index: tylo.Static):
    t = tylo.block_idx.x * tylo.block_dim.x + tylo.thread_idx.x
    a = tylo.local(tylo.f32, 8)
    for k in range(8):
        a[k] = x[t * 8 + k]
    for r in tylo.range(3):
        for k in range(8):
            a[k] = a[k] * 0.5 + a[(k + 1) % 8]
    if runtime_index:
        for r in tylo.range(j):
            a[(r * 3) % 8] = a[(r * 5) % 8] + 1.0
    s = 0.0
    for k in range(8):
        s = s + a[k] * (k + 1)
    out[t] = s


def stencil_reference(x: np.ndarray, j: int, runtime_index: bool) -> np.ndarray:
    a = x.reshape(-1, 8).astype(np.float32).copy()
    for _ in range(3):
        for k in range(8):
            a[:, k] = a[:, k] * np.float32(0.5) + a[:, (k + 1) % 8]
    if runtime_index:
        for r in range(j):
            a[:, (r * 3) % 8] = a[:, (r * 5) % 8] + np.float32(1.0)
    return (a * np.arange(1, 9, dtype=np.float32)).sum(axis=1)


@pytest.mark.interpret
@pytest.mark.parametrize(("runtime_index", "j"), [(False, 0), (True, 0), (True, 1), (True, 21)])
def test_local_arrays(gpu_runtime, runtime_index, j):
    threads = 1024
    x = np.random.default_rng(j).standard_normal(threads * 8).astype(np.float32)
    out = dev(np.zeros(threads, np.float32))
    stencil[threads // 128, 128](out, dev(x), j, runtime_index)
    np.testing.assert_allclose(
        host(out), stencil_reference(x, j, runtime_index), rtol=1e-5, atol=1e-5
    )


# ---------------------------------------------------------------------------- subprocesses

PRINT_SCRIPT = """
import numpy as np, tylo
from tylo.arrays import DeviceBuffer
from tylo.backend import driver

@tylo.kernel
def say(x, big):
    t = tylo.thread_idx.x
    u = tylo.value(7, tylo.u8)
    tylo.print_("t=%d x=%.3f big=%lld neg=%d u=%u pct=100%%\\n", t, x[t], big, -t, u)

x = np.arange(8, dtype=np.float32) / 4
say[1, 8](DeviceBuffer.from_numpy(x), 2**40 + 3)
driver.synchronize()
"""

BOUNDS_SCRIPT = """
import sys
import numpy as np, tylo
from tylo.arrays import DeviceBuffer
from tylo.backend import driver

@tylo.kernel
def shifted(out, x, j: tylo.Int(min=0)):
    s = tylo.shared(tylo.f32, 64, name="tile")
    t = tylo.thread_idx.x
    s[t] = x[t]
    tylo.sync_threads()
    out[t] = s[t + j]

j = int(sys.argv[1])
x = np.arange(64, dtype=np.float32)
out = DeviceBuffer.from_numpy(np.zeros(64, np.float32))
try:
    shifted[1, 64](out, DeviceBuffer.from_numpy(x), j)
    driver.synchronize()
except Exception as err:
    print("launch failed:", type(err).__name__, err, flush=True)
    sys.exit(3)
print("ok", out.to_numpy()[:4].tolist(), flush=True)
"""


def run_script(tmp_path: Path, text: str, *args: str, debug: bool = False):
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(text))
    env = dict(os.environ, PYTHONPATH=str(ROOT), TYLO_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("TYLO_DEBUG_BOUNDS", None)
    if debug:
        env["TYLO_DEBUG_BOUNDS"] = "1"
    r = subprocess.run(
        [sys.executable, str(script), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    return script, r


@pytest.mark.interpret
def test_print_from_every_thread(gpu_runtime, tmp_path):
    _, r = run_script(tmp_path, PRINT_SCRIPT)
    assert r.returncode == 0, r.stderr
    lines = sorted(line for line in r.stdout.splitlines() if line.startswith("t="))
    want = sorted(f"t={t} x={t / 4:.3f} big={2**40 + 3} neg={-t} u=7 pct=100%" for t in range(8))
    assert lines == want


@pytest.mark.interpret(
    skip="checks the CUDA error a trap ends the launch with; the interpreter raises "
    "tylo.interpret.Trap (tests/host/test_interpret_checks.py)"
)
def test_bounds_debug_traps_with_the_message(gpu_runtime, tmp_path):
    script, r = run_script(tmp_path, BOUNDS_SCRIPT, "5", debug=True)
    line = next(
        k + 1
        for k, text in enumerate(script.read_text().splitlines())
        if text.strip() == "out[t] = s[t + j]"
    )
    assert r.returncode == 3, (r.stdout, r.stderr)
    printed = [x for x in r.stdout.splitlines() if x.startswith("tylo: out-of-bounds")]
    # threads 59..63 read s[64..68]: each prints before the trap ends the launch
    assert printed, r.stdout
    for text in printed:
        assert text.startswith("tylo: out-of-bounds shared access tile[")
        assert f" in kernel shifted at script.py:{line}: index " in text
        index = int(text.split("index ")[1].split(",")[0])
        assert 64 <= index <= 68 and text.endswith("bound 64")
    # trap ends the launch with an error (which one depends on the GPU and driver)
    assert "launch failed:" in r.stdout and "CUDA_ERROR" in r.stdout


@pytest.mark.interpret
def test_bounds_debug_passes_in_bounds(gpu_runtime, tmp_path):
    _, ok = run_script(tmp_path, BOUNDS_SCRIPT, "0", debug=True)
    assert ok.returncode == 0 and "ok [0.0, 1.0, 2.0, 3.0]" in ok.stdout, ok.stdout + ok.stderr
    assert "tylo: out-of-bounds" not in ok.stdout


# ---------------------------------------------------------------------------- compile only


def test_every_kernel_here_compiles(tmp_path, monkeypatch):
    """Without a GPU: the kernels above and those of the subprocess scripts compile for
    sm_90a (so a GPU run fails only on what it measures)."""
    import runpy

    histogram.compile(U32, U32, int, 1000, "shared", block=256, target="sm_90a")
    for d in (I32, U32, I64, tylo.u64):
        for op in ("min", "max", "exch", "cas", "add"):
            old_values.compile(d, d, d, int, op, block=256, target="sm_90a")
    float_sums.compile(F32, F64, F32, int, block=256, target="sm_90a")
    half_counts.compile(tylo.f16, int, block=256, target="sm_80")
    half_counts.compile(tylo.bf16, int, block=256, target="sm_90a")
    stencil.compile(F32, F32, int, True, block=128, target="sm_90a")
    monkeypatch.setenv("TYLO_DEBUG_BOUNDS", "1")
    for name, text, kernel, specs in (
        ("say", PRINT_SCRIPT, "say", (F32, int)),
        ("shifted", BOUNDS_SCRIPT, "shifted", (F32, F32, int)),
    ):
        head = textwrap.dedent(text).split("\nx = np")[0].split("\nj = int")[0]
        path = tmp_path / f"{name}.py"
        path.write_text(head)
        k = runpy.run_path(str(path))[kernel].compile(*specs, block=64, target="sm_90a")
        assert "vprintf" in k.ptx
