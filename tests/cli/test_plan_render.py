"""The plan's table is written as rich would write it (issue 24: rich's rendering of a
1,000-workload table cost 0.16 s of CPU for its plain characters when nothing is styled)."""

from __future__ import annotations

import io

from rich.console import Console
from rich.text import Text

from placer.cli.output import print_text
from placer.cli.plan import render_table
from placer.solve import solve
from tests.builders import fleet, groups, wl

TOL = ({"key": "dedicated", "operator": "Exists"},)


def _plan():
    f = fleet("east: 2x8 | 1x4 taint=dedicated=ml:NoSchedule", "west: 1x8 gpu=a100")
    gs = groups(wl("ml/a", "2x8"), wl("ml/b", "1x4", tolerations=TOL), wl("ml/c", "1x8 gpu=a100"),
                wl("ml/too-big", "9x8"), wl("ml/ünïcode", "1x8 gpu=h100"), wl("ml/spare", "3x2"))
    return solve(f, gs, time_limit=10)


def _both(text: Text, **console) -> tuple[str, str, Console]:
    """What rich writes for `text`, and what print_text writes, on alike consoles."""
    mine, theirs = io.StringIO(), io.StringIO()
    Console(file=theirs, soft_wrap=True, **console).print(text)
    con = Console(file=mine, soft_wrap=True, **console)
    print_text(con, text)
    return mine.getvalue(), theirs.getvalue(), con


def test_a_piped_table_is_what_rich_writes():
    plan = _plan()
    assert plan.placements and plan.unplaced
    for wide in (False, True):
        for width in (40, 80, 200):
            text = render_table(plan, wide=wide, width=width)
            mine, theirs, _ = _both(text, width=width)
            assert mine == theirs and "\x1b[" not in mine
            assert "ünïcode" in mine and "unplaced" in mine


def test_styles_and_tabs_still_go_through_rich():
    text = render_table(_plan(), width=80)
    mine, theirs, con = _both(text, width=80, force_terminal=True, color_system="truecolor")
    assert con.is_terminal and mine == theirs and "\x1b[" in mine       # styled: rich writes it
    tabbed = Text("a\tb\n", style="bold")
    mine, theirs, _ = _both(tabbed, width=80)
    assert mine == theirs and "\t" not in mine                          # rich expands tabs
