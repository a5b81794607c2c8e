"""The test extra's packages are never a skip reason (tylo issue 36, item 7).

``pip install -e '.[test]'`` installs everything in ``pyproject.toml``'s test extra, so a
test that needs one of those packages fails, naming the package and the install command,
where the package is missing: a broken test environment is a failure, not coverage that
silently goes away. (What the extra cannot install, such as Debian's ``chromium`` or a
GPU, is still a skip with its reason.)
"""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

__all__ = ["INSTALL", "require_module", "require_nvdisasm"]

INSTALL = "pip install -e '.[test]'"


def require_module(name: str, package: str) -> ModuleType:
    """Module ``name`` (from ``package`` of the test extra), or fail the calling test."""
    try:
        return importlib.import_module(name)
    except ImportError as err:
        pytest.fail(
            f"{package} is in the test extra, but {name} does not import ({err}); {INSTALL}",
            pytrace=False,
        )
        raise AssertionError("unreachable") from None  # pragma: no cover - fail raises


def require_nvdisasm() -> str:
    """The path of ``nvdisasm`` (nvidia-cuda-nvdisasm, in the test extra), or fail."""
    from tylo.backend.sass import find_nvdisasm

    path = find_nvdisasm()
    if path is None:
        pytest.fail(
            f"nvidia-cuda-nvdisasm is in the test extra, but nvdisasm was not found; {INSTALL}",
            pytrace=False,
        )
    return path
