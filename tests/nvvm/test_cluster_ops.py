"""Cluster operations compiled for sm_90a without a GPU: the PTX each op emits, what ptxas
assembles it to, the static facts of a cluster kernel, and the refusals (targets below
sm_90, ranks outside the cluster, multicast masks that name no CTA or CTAs that do not
exist, multicast in a kernel without clusters)."""

from __future__ import annotations

import pytest

import tylo
from tylo.kernel.facts import decide
from tylo.layouts import Layout, dim
from tylo.nvgpu import cluster as cl
from tylo.nvgpu import tma
from tylo.nvgpu.mbarrier import Barriers, fence_barrier_init
from tylo.tile.views import SharedTile

M, K, LD = dim("M"), dim("K"), dim("ld", multiple_of=8)
PLAN = tma.TensorMapPlan(tylo.f32, Layout((M, K), (LD, 1)), (8, 8), "none", Layout((8, 8), (8, 1)))


@tylo.kernel
def every_op(out):
    buf = tylo.shared(tylo.f32, 128)
    bars = Barriers(1)
    t = tylo.thread_idx.x
    r = cl.cluster_ctarank()
    buf[t] = tylo.value(r, tylo.f32)
    if t == 0:
        bars.init(0, 1)
        fence_barrier_init()
    cl.cluster_sync()
    peer = (r + 1) % cl.cluster_nctarank()
    v = cl.map_shared(buf, peer)[t]
    if t == 0:
        bars.arrive(0, cta=peer)
    bars.wait(0, 0, scope="cluster")
    cl.cluster_arrive(relaxed=True)
    cl.cluster_wait()
    ids = cl.cluster_idx.x * 1000 + cl.cluster_cta_idx.x * 100 + cl.cluster_dim.x
    out[tylo.block_idx.x * 128 + t] = v + tylo.value(ids, tylo.f32)


def test_every_op_assembles():
    k = every_op.compile(tylo.f32, block=128, cluster=(2, 1, 1), target="sm_90a")
    for text in (
        "mov.u32 %r{}, %cluster_ctarank;",
        "%cluster_ctaid.x",
        "%clusterid.x",
        "barrier.cluster.arrive.release;",
        "barrier.cluster.arrive.relaxed;",
        "barrier.cluster.wait.acquire;",
        "mapa.shared::cluster.u32",
        "ld.shared::cluster.b32",
        "mbarrier.arrive.release.cluster.shared::cluster.b64 _,",
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64",
        "fence.mbarrier_init.release.cluster;",
    ):
        if "{}" in text:
            assert text.split("{}")[1] in k.ptx, text
        else:
            assert text in k.ptx, text
    sass = k.sass
    for op in ("UCGABAR_ARV", "UCGABAR_WAIT", "SYNCS.ARRIVE.TRANS64.RED"):
        assert op in sass, op
    # ptxas 13 assembles mapa into address arithmetic on the shared window (SR_SWINHI, a
    # PRMT inserting the rank) and ld.shared::cluster into a generic load; a MAPA would do
    assert "MAPA" in sass or ("SR_SWINHI" in sass and "LD.E" in sass)
    assert "LDL" not in sass and "STL" not in sass
    assert ".extern .func" not in k.ptx


def test_without_clusters_the_ranks_are_static():
    """A kernel without clusters is a grid of 1-CTA clusters: rank 0, no special register
    read, the cluster index is the block index."""

    @tylo.kernel
    def plain(out):
        out[tylo.block_idx.x] = tylo.value(
            cl.cluster_ctarank() + cl.cluster_nctarank() + cl.cluster_cta_idx.y, tylo.f32
        ) + tylo.value(cl.cluster_idx.x, tylo.f32)

    k = plain.compile(tylo.f32, block=32, target="sm_90a")
    assert "%cluster" not in k.ptx and "%clusterid" not in k.ptx
    assert "%ctaid.x" in k.ptx


def test_static_shape_and_bounds():
    seen = {}

    @tylo.kernel
    def probe(out):
        seen["dims"] = (cl.cluster_dim.x, cl.cluster_dim.y, cl.cluster_dim.z)
        seen["n"] = cl.cluster_nctarank()
        r = cl.cluster_ctarank()
        seen["rank_bound"] = decide(r < seen["n"]), decide(r < seen["n"] - 1)
        seen["cta_bound"] = decide(cl.cluster_cta_idx.y < 3), decide(cl.cluster_cta_idx.y < 2)
        out[0] = tylo.value(r, tylo.f32)

    probe.compile(tylo.f32, block=32, cluster=(2, 3), target="sm_90a")
    assert seen["dims"] == (2, 3, 1) and seen["n"] == 6
    assert seen["rank_bound"] == (True, None) and seen["cta_bound"] == (True, None)


def _kernel_using(op):
    @tylo.kernel
    def k(out):
        buf = tylo.shared(tylo.f32, 32)
        op(buf)
        out[0] = 1.0

    return k


OPS = {
    "cluster_ctarank": lambda buf: cl.cluster_ctarank(),
    "cluster_nctarank": lambda buf: cl.cluster_nctarank(),
    "cluster_idx": lambda buf: cl.cluster_idx.x,
    "cluster_dim": lambda buf: cl.cluster_dim.y,
    "cluster_sync": lambda buf: cl.cluster_sync(),
    "cluster_arrive": lambda buf: cl.cluster_arrive(),
    "cluster_wait": lambda buf: cl.cluster_wait(),
    "map_shared": lambda buf: cl.map_shared(buf, 0),
}


@pytest.mark.parametrize("name", sorted(OPS))
def test_every_op_refuses_sm80(name):
    k = _kernel_using(OPS[name])
    with pytest.raises(tylo.TyloError, match="PTXOpError: cluster needs sm_90"):
        k.compile(tylo.f32, block=32, target="sm_80")


def test_remote_arrive_refuses_sm80():
    @tylo.kernel
    def k(out):
        Barriers(1).arrive(0, cta=0)

    with pytest.raises(tylo.TyloError, match="sm_90"):
        k.compile(tylo.f32, block=32, target="sm_80")


@pytest.mark.parametrize("rank", [2, -1, 16, True])
def test_static_ranks_outside_the_cluster_are_refused(rank):
    k = _kernel_using(lambda buf: cl.map_shared(buf, rank))
    with pytest.raises(
        tylo.TyloError,
        match="ClusterOpError: map_shared: CTA rank .* not in this kernel's cluster of 2",
    ):
        k.compile(tylo.f32, block=32, cluster=2, target="sm_90a")

    @tylo.kernel
    def arrive(out):
        Barriers(1).arrive(0, cta=rank)

    with pytest.raises(tylo.TyloError, match="ClusterOpError: .*not in this kernel's cluster"):
        arrive.compile(tylo.f32, block=32, cluster=2, target="sm_90a")


def test_map_shared_refuses_what_is_not_shared():
    @tylo.kernel
    def k(out):
        cl.map_shared(out, 0)

    with pytest.raises(
        tylo.TyloError, match="ClusterOpError: map_shared: expected a shared tensor"
    ):
        k.compile(tylo.f32, block=32, cluster=2, target="sm_90a")

    @tylo.kernel
    def small(out):
        cl.map_shared(tylo.shared(tylo.u8, 16), 0)

    with pytest.raises(tylo.TyloError, match="ClusterOpError: .*16-, 32- or 64-bit"):
        small.compile(tylo.f32, block=32, cluster=2, target="sm_90a")


def test_aligned_forms():
    k = _kernel_using(lambda buf: cl.cluster_sync(aligned=True)).compile(
        tylo.f32, block=32, cluster=2, target="sm_90a"
    )
    assert "barrier.cluster.arrive.release.aligned;" in k.ptx
    assert "barrier.cluster.wait.acquire.aligned;" in k.ptx
    assert "UCGABAR_ARV" in k.sass and "UCGABAR_WAIT" in k.sass
    k = _kernel_using(lambda buf: cl.cluster_arrive(relaxed=True, aligned=True)).compile(
        tylo.f32, block=32, cluster=2, target="sm_90a"
    )
    assert "barrier.cluster.arrive.relaxed.aligned;" in k.ptx


@pytest.mark.parametrize(
    "op,match",
    [
        (lambda: cl.cluster_arrive(relaxed=1), "cluster_arrive: relaxed must be"),
        (lambda: cl.cluster_arrive(aligned="yes"), "cluster_arrive: aligned must be"),
        (lambda: cl.cluster_wait(aligned=None), "cluster_wait: aligned must be"),
        (lambda: cl.cluster_sync(aligned=0), "cluster_arrive: aligned must be"),
    ],
)
def test_flags_must_be_bools(op, match):
    with pytest.raises(tylo.TyloError, match="ClusterOpError: " + match):
        _kernel_using(lambda buf: op()).compile(tylo.f32, block=32, target="sm_90a")


def test_bad_arguments():

    @tylo.kernel
    def scope(out):
        Barriers(1).wait(0, 0, scope="gpu")

    with pytest.raises(tylo.TyloError, match="PipelineError: mbarrier wait: scope must be"):
        scope.compile(tylo.f32, block=32, target="sm_90a")


# ---------------------------------------------------------------------------- multicast


@tylo.kernel
def multicast(out, tm, mask: tylo.Static):
    tile = SharedTile(tylo.shared(tylo.f32, 64, align=128), PLAN.smem_layout)
    bars = Barriers(1)
    t = tylo.thread_idx.x
    if t == 0:
        bars.init(0, 1)
        fence_barrier_init()
    cl.cluster_sync()
    if t == 0:
        bars.arrive_expect_tx(0, PLAN.box_bytes)
        if cl.cluster_ctarank() == 0:
            tma.load(tm, tile, (0, 0), bars, 0, multicast=mask)
    bars.wait(0, 0)
    out[t] = tile.storage[t]
    cl.cluster_sync()


def test_multicast_assembles():
    k = multicast.compile(tylo.f32, PLAN, 0b11, block=64, cluster=2, target="sm_90a")
    assert (
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
        ".multicast::cluster" in k.ptx
    )
    assert "UTMALDG.2D.MULTICAST" in k.sass


@pytest.mark.parametrize(
    "mask,match",
    [
        (0, "nonzero 16-bit"),
        (1 << 16, "nonzero 16-bit"),
        (-1, "nonzero 16-bit"),
        (0b100, r"names CTA rank\(s\) \[2\]"),
        (0xFFFF, r"\[2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15\]"),
        (True, "integer CTA mask"),
        (1.0, "integer CTA mask"),
    ],
)
def test_static_masks_are_checked(mask, match):
    with pytest.raises(tylo.TyloError, match="TMAError: tma.load: .*" + match):
        multicast.compile(tylo.f32, PLAN, mask, block=64, cluster=2, target="sm_90a")


@pytest.mark.parametrize("mask", range(1, 16))
def test_every_mask_of_a_four_cta_cluster_is_accepted(mask):
    k = multicast.trace(tylo.f32, PLAN, mask, block=64, cluster=4, target="sm_90a")
    assert ".multicast::cluster" in k.llvm


def test_multicast_needs_a_cluster_kernel():
    with pytest.raises(tylo.TyloError, match="TMAError: .*not a cluster kernel"):
        multicast.compile(tylo.f32, PLAN, 1, block=64, target="sm_90a")


def test_runtime_mask():
    @tylo.kernel
    def runtime(out, tm, mask: int):
        tile = SharedTile(tylo.shared(tylo.f32, 64, align=128), PLAN.smem_layout)
        bars = Barriers(1)
        tma.load(tm, tile, (0, 0), bars, 0, multicast=mask)
        out[0] = tile.storage[0]

    k = runtime.compile(tylo.f32, PLAN, int, block=32, cluster=2, target="sm_90a")
    assert "UTMALDG.2D.MULTICAST" in k.sass


# ---------------------------------------------------------------------------- pipelines


def _pipeline_kernel(consumers):
    from tylo.nvgpu.mbarrier import Pipeline, PipelinePlan

    @tylo.kernel
    def k(out):
        pipe = Pipeline(PipelinePlan(stages=2, consumers=consumers))
        pipe.init()
        pipe.producer_acquire(0, scope="cluster")
        pipe.producer_commit(0)
        pipe.consumer_wait(0)
        pipe.consumer_release(0, cta=(cl.cluster_ctarank() + 1) % 2)
        out[0] = 1.0

    return k


def test_pipeline_counts_the_cluster_s_consumers():
    """A stage filled by multicast is released by the consumers of every receiving CTA:
    the empty barrier may expect up to block x cluster arrivals, and no more."""
    k = _pipeline_kernel(256).compile(tylo.f32, block=128, cluster=2, target="sm_90a")
    # the release says only that reads are done: a CTA-scope remote arrive, no fence
    assert "mbarrier.arrive.shared::cluster.b64" in k.ptx
    assert "release.cluster" not in k.ptx
    assert "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64" in k.ptx
    with pytest.raises(tylo.TyloError, match="the cluster has 256 threads"):
        _pipeline_kernel(257).compile(tylo.f32, block=128, cluster=2, target="sm_90a")
    with pytest.raises(tylo.TyloError, match="the block has 128 threads"):
        _pipeline_kernel(129).compile(tylo.f32, block=128, target="sm_90a")


def test_map_shared_on_tiles_and_16_bit_elements():
    @tylo.kernel
    def tiles(out):
        tile = SharedTile(tylo.shared(tylo.bf16, 64, align=16), Layout((8, 8), (1, 8)))
        peer = cl.map_shared(tile, 1)
        t = tylo.thread_idx.x
        peer[(t % 8, t // 8)] = tylo.value(t, tylo.f32).to(tylo.bf16)
        cl.cluster_sync()
        out[t] = tile.storage[t]
        x = peer[(0, 1)]
        out[t + 64] = x

    k = tiles.compile(tylo.bf16, block=64, cluster=2, target="sm_90a")
    assert "st.shared::cluster.b16" in k.ptx and "ld.shared::cluster.b16" in k.ptx
    assert "LDL" not in k.sass and "STL" not in k.sass


def _remote_arrive_kernel(scope):
    @tylo.kernel
    def k(out):
        bars = Barriers(1)
        bars.init(0, 1)
        peer = (cl.cluster_ctarank() + 1) % 2
        if scope == "default":
            bars.arrive(0, cta=peer)
        else:
            bars.arrive(0, cta=peer, scope=scope)
        out[0] = 1.0

    return k


@pytest.mark.parametrize(
    "scope, sem, membar",
    [
        ("default", ".release.cluster", True),
        ("cluster", ".release.cluster", True),
        ("cta", "", False),
    ],
)
def test_remote_arrive_scope(scope, sem, membar):
    """A remote arrive releases at cluster scope unless told ``scope="cta"``; only the
    cluster-scope form puts a GPU-wide memory barrier before the arrive in SASS (the cost
    that made the cluster GEMM's every stage release wait for the epilogue's stores)."""
    k = _remote_arrive_kernel(scope).compile(tylo.f32, block=32, cluster=2, target="sm_90a")
    assert f"mbarrier.arrive{sem}.shared::cluster.b64 _," in k.ptx
    assert ("MEMBAR.ALL.GPU" in k.sass) is membar


@pytest.mark.parametrize("scope", ["gpu", "", 1, "CTA"])
def test_arrive_scope_refused(scope):
    @tylo.kernel
    def k(out):
        Barriers(1).arrive(0, scope=scope)

    with pytest.raises(tylo.TyloError, match="scope must be 'cta' or 'cluster'"):
        k.compile(tylo.f32, block=32, target="sm_90a")
