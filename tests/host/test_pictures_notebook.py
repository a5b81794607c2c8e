"""A notebook shows a layout as its picture after importing only tylo or tylo.layouts (issue
34, item 10), and tylo.layouts stays pure: ``Layout._repr_svg_`` (the method IPython's SVG
formatter calls) reaches tylo.pictures through the package root, which imports it only when
a picture is first asked for, and answers None (IPython then shows the text) when it cannot.

Each check runs in a fresh interpreter, so nothing imported by other tests can help.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(code: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_tylo_layouts_alone_gives_the_picture():
    got = run(
        "import json, sys\n"
        "import tylo.layouts as tl\n"
        "L = tl.Layout((4, 8), (8, 1))\n"
        "before = 'tylo.pictures' in sys.modules\n"
        "svg = L._repr_svg_()\n"
        "swz = tl.ComposedLayout(tl.Swizzle(2, 0, 3), 0, L)._repr_svg_()\n"
        "from tylo.pictures import layout_svg\n"
        "print(json.dumps({'before': before, 'svg': svg, 'same': svg == layout_svg(L),\n"
        "    'swz': swz == layout_svg(tl.ComposedLayout(tl.Swizzle(2, 0, 3), 0, L)),\n"
        "    'symbolic': tl.Layout((tl.dim('N'), 2), (2, 1))._repr_svg_(),\n"
        "    'huge': tl.Layout(2**40, 1)._repr_svg_()}))\n"
    )
    assert got["before"] is False  # importing tylo.layouts did not import tylo.pictures
    assert got["svg"].startswith("<svg") and got["same"] and got["swz"]
    assert got["symbolic"] is None and got["huge"] is None  # the text form instead


def test_importing_tylo_gives_the_picture():
    got = run(
        "import json, tylo\n"
        "from tylo.layouts import Layout\n"
        "print(json.dumps({'svg': Layout(8, 2)._repr_svg_()[:4]}))\n"
    )
    assert got["svg"] == "<svg"


def test_no_pictures_package_means_text_not_an_error():
    got = run(
        "import json, sys\n"
        "sys.modules['tylo.pictures'] = None  # import tylo.pictures now raises ImportError\n"
        "import tylo.layouts as tl\n"
        "L = tl.Layout((4, 8), (8, 1))\n"
        "c = tl.ComposedLayout(tl.Swizzle(2, 0, 3), 0, L)\n"
        "print(json.dumps({'svg': L._repr_svg_(), 'swz': c._repr_svg_(), 'text': str(L)}))\n"
    )
    assert got == {"svg": None, "swz": None, "text": "(4,8):(8,1)"}


def test_the_hook_is_the_pictures_repr_svg():
    """In this process: the hook answers what tylo.pictures.repr_svg answers."""
    from tylo.layouts import ComposedLayout, Layout, Swizzle, dim
    from tylo.pictures import MAX_CELLS, repr_svg

    for x in (
        Layout((2, 2), (1, 2)),
        ComposedLayout(Swizzle(1, 1, 1), 0, Layout((4, 4), (4, 1))),
        Layout((dim("M"), 4), (1, dim("M"))),
        Layout(MAX_CELLS + 1, 1),
        Layout(MAX_CELLS, 1),
    ):
        assert x._repr_svg_() == repr_svg(x)
    assert Layout(MAX_CELLS, 1)._repr_svg_() is not None
