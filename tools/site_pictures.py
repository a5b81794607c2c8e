"""mkdocs hook: draws the pictures of ``docs/pictures.md`` when the site is built.

The page's doctests check the pictures structurally; this hook appends the same pictures,
drawn by :mod:`tylo.pictures` at build time, as inline ``<svg>`` elements, so the built page
shows what the doctests check and cannot show a stale image. ``mkdocs.yml`` lists it under
``hooks``; ``tests/host/test_site_browser.py`` finds the pictures in a browser.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PAGE = "pictures.md"

# (caption, what tylo.pictures draws): the layouts the page's doctests use
GALLERY: tuple[tuple[str, str], ...] = (
    ('`layout_svg(parse("((2,4),8):((1,16),2)"))`: cells labelled by offset', "layout"),
    ('`bank_svg(parse("S<3,3,3> o (8,64):(64,1)"), 2)`: a swizzled bf16 tile by bank', "bank"),
    ('`mma_svg(MMAAtom((16, 8, 16), "bf16"))`: the operands of mma.sync m16n8k16', "mma"),
)


def draw(kind: str) -> str:
    """The SVG text of the gallery picture ``kind`` (``layout``, ``bank`` or ``mma``)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tylo.layouts import parse
    from tylo.nvgpu.warp.mma import MMAAtom
    from tylo.pictures import bank_svg, layout_svg, mma_svg

    if kind == "layout":
        return layout_svg(parse("((2,4),8):((1,16),2)"))
    if kind == "bank":
        return bank_svg(parse("S<3,3,3> o (8,64):(64,1)"), 2)
    if kind == "mma":
        return mma_svg(MMAAtom((16, 8, 16), "bf16"))
    raise KeyError(f"site_pictures.draw: no gallery picture {kind!r}; known: layout, bank, mma")


def gallery_markdown() -> str:
    """The section appended to ``pictures.md``: a heading, then each picture in a ``div``."""
    parts = [
        "\n\n## The pictures, drawn\n",
        "Drawn by `tylo.pictures` when this site was built (`tools/site_pictures.py`).\n",
    ]
    for caption, kind in GALLERY:
        svg = draw(kind).strip()
        parts.append(
            f'{caption}\n\n<div class="tylo-picture" data-picture="{kind}">\n{svg}\n</div>\n'
        )
    return "\n".join(parts)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """mkdocs event: append the gallery to ``pictures.md``; other pages pass unchanged."""
    if page.file.src_uri == PAGE:
        return markdown + gallery_markdown()
    return markdown
