"""The warp GEMM's configuration fits the shared memory of the GPU it runs on: the default
4-stage pipeline takes 192 KiB, more than an sm_80 block may use (163 KiB) and far more
than sm_86/89/120's 99 KiB; ``choose_config(max_shared=...)`` (what ``gemm`` passes for the
device) lowers the depth, then takes the small plan, and never exceeds the limit."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tylo.ops.gemm.host import choose_config
from tylo.target import Target

TARGETS = ["sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_90a", "sm_100a", "sm_120"]


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(TARGETS),
    st.integers(1, 5000),
    st.integers(1, 5000),
    st.integers(1, 5000),
    st.integers(0, 9),
)
def test_the_configuration_fits_the_targets_shared_memory(target, m, n, k, pad):
    limit = Target.parse(target).max_shared_bytes
    ld = k + pad
    cfg = choose_config(m, n, k, ld, ld, ldd=m, max_shared=limit)
    assert cfg.shared_bytes <= limit, (target, cfg.describe())
    unlimited = choose_config(m, n, k, ld, ld, ldd=m)
    if unlimited.shared_bytes <= limit:  # nothing to lower: the same configuration
        assert cfg == unlimited


def test_sm80_runs_three_stages_of_the_large_tile():
    cfg = choose_config(
        4096, 4096, 4096, 4096, 4096, ldd=4096, max_shared=Target.parse("sm_80").max_shared_bytes
    )
    assert cfg.stages == 3 and cfg.shared_bytes == 144 * 1024
    assert choose_config(4096, 4096, 4096, 4096, 4096, ldd=4096).stages == 4


def test_stages_given_are_kept_and_max_shared_is_checked():
    cfg = choose_config(4096, 4096, 4096, 4096, 4096, stages=4, max_shared=100 * 1024)
    assert cfg.stages == 4  # asked for: the launch will say it does not fit
    with pytest.raises(Exception, match="max_shared"):
        choose_config(64, 64, 64, 64, 64, max_shared="big")
