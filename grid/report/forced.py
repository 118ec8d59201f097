"""How the report labels forced-acceptance cells (grid/analysis/forced.py): one label,
`FORCED_LABEL` ("forced acceptance: performance only"), after every forced cell in a table
(terminal, report.md, report.html), one style of its own and one legend entry with the label in
every plot that draws one, and in decision.json; a run without forced cells shows none of it."""

from __future__ import annotations

from typing import Any

import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from grid.analysis.forced import FORCED_LABEL, forced_mask

TAG = f"[{FORCED_LABEL}]"
"""What follows a forced cell's status or line in a table."""
HATCH = "//"
"""A forced series' bars: hatched."""
MARKER = "x"
"""A forced series' marker (its line dotted where the others' are solid)."""
def forced_variants(cells: pd.DataFrame) -> set[str]:
    """The variants with forced cells (a forced-acceptance axis puts its part in the variant
    label, so a variant's cells are forced alike)."""
    if cells.empty:
        return set()
    return set(cells.variant[forced_mask(cells)].astype(str))


def tagged(text: str, forced: bool) -> str:
    """`text`, followed by the label when it is about forced cells."""
    return f"{text} {TAG}" if forced else text


def line_format(fmt: str, dotted: bool = True) -> str:
    """A forced series' matplotlib format from the one its plot gives the others: the same
    line, dotted where solid (not with `dotted` False: where the line style already tells
    something apart, e.g. the load), with the forced marker (`-o` -> `:x`, `--^` -> `--x`)."""
    line = fmt.rstrip("os^vDP*")
    return (":" if dotted and line in ("", "-") else line) + MARKER


def legend(ax: Axes, forced: bool, bars: bool = False, **kw: Any) -> None:
    """The axes' legend with one entry for the forced series drawn on it (`forced`): a grey
    dotted line with the forced marker, or a hatched patch for bars."""
    handles, labels = ax.get_legend_handles_labels()
    if forced:
        proxy: Artist = (Patch(facecolor="white", edgecolor="grey", hatch=HATCH) if bars
                         else Line2D([], [], color="grey", linestyle=":", marker=MARKER))
        handles, labels = [*handles, proxy], [*labels, FORCED_LABEL]
    ax.legend(handles, labels, **kw)


def cell_counts(cells: pd.DataFrame) -> dict[str, Any]:
    """decision.json `cells` additions: the forced cells' count and label (empty without)."""
    n = int(forced_mask(cells).sum()) if len(cells) else 0
    return {"forced": n, "forced_label": FORCED_LABEL} if n else {}
