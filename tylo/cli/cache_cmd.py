"""``tylo cache info|clear``: where the compile cache lives, what it holds; empty it.

The location comes from one function, :func:`cache_location`, which asks
:mod:`tylo.backend.cache` (``$TYLO_CACHE_DIR``, else ``~/.cache/tylo``); when the cache's
location moves, only that function changes.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from tylo.cli.common import EXIT_FAILED, EXIT_OK

__all__ = ["add_parser", "cache_location", "cache_summary", "run"]

EXAMPLES = """\
examples:
  tylo cache info                      where the cache is, how many entries, how many bytes
  tylo cache clear                     remove every compiled entry
  TYLO_CACHE_DIR=/tmp/c tylo cache info
"""


def cache_location() -> Path:
    """The compile cache's directory (the one source of it for the command)."""
    from tylo.backend.cache import cache_dir

    return cache_dir()


def cache_summary(directory: Path) -> dict[str, Any]:
    """``{"entries", "bytes", "versions"}`` of the cache under ``directory``: entries
    (regular ``*.tylo`` files inside it; links are not followed) and their bytes, per
    format directory ``v<N>``."""
    from tylo.backend.cache import DiskCache

    versions: dict[str, list[int]] = {}
    for _, n, path in DiskCache(directory, limit=1).entries():
        counts = versions.setdefault(path.parts[-3], [0, 0])
        counts[0] += 1
        counts[1] += n
    return {
        "entries": sum(c[0] for c in versions.values()),
        "bytes": sum(c[1] for c in versions.values()),
        "versions": {k: {"entries": c[0], "bytes": c[1]} for k, c in sorted(versions.items())},
    }


def add_parser(sub: Any) -> None:
    """Register ``tylo cache``."""
    p = sub.add_parser(
        "cache",
        help="show or clear the compile cache",
        description="Show where the compile cache is and what it holds (info), or remove "
        "every entry (clear). TYLO_CACHE_DIR moves it; TYLO_CACHE=0 turns it off.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("action", choices=("info", "clear"), help="info | clear")
    p.set_defaults(run=run)


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"  # pragma: no cover - the loop always returns


def run(args: argparse.Namespace) -> int:
    """Run ``tylo cache info`` or ``tylo cache clear``; returns the exit status."""
    from tylo.backend.cache import DiskCache, cache_enabled

    directory = cache_location()
    if args.action == "info":
        s = cache_summary(directory)
        print(f"directory  {directory}{'' if directory.is_dir() else ' (not created yet)'}")
        enabled = "yes" if cache_enabled() else f"no (TYLO_CACHE={os.environ.get('TYLO_CACHE')})"
        print(f"enabled    {enabled}")
        print(f"entries    {s['entries']}")
        print(f"size       {_bytes(s['bytes'])}")
        for version, c in s["versions"].items():
            print(f"  {version}: {c['entries']} entries, {_bytes(c['bytes'])}")
        return EXIT_OK
    removed = DiskCache(directory).clear()
    print(f"removed {removed} entries from {directory}")
    left = cache_summary(directory)["entries"]
    if left:
        print(f"{left} entries could not be removed (permissions?)")
        return EXIT_FAILED
    return EXIT_OK
