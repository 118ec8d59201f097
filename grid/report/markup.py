"""The HTML report's building blocks (grid/report/html.py and its sections): escaping, an
embedded image, a number or a number with its interval, a plain table."""

from __future__ import annotations

import base64
import html
import math
from typing import Any

import pandas as pd


def esc(value: object) -> str:
    return html.escape("" if value is None else str(value))


def img(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode()
    return f'<img alt="{esc(alt)}" src="data:image/png;base64,{data}">'


def num(value: Any, fmt: str = "{:.1f}", scale: float = 1.0) -> str:
    """`value` formatted, or – where it is missing or not finite."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)) or \
            pd.isna(value):
        return "–"
    return fmt.format(float(value) * scale)


def dash(value: Any, fmt: str, scale: float = 1.0) -> str:
    """`value` formatted for the text summary, or - where it is missing (None, NaN)."""
    return "-" if value is None or pd.isna(value) else fmt.format(float(value) * scale)


def ci(row: pd.Series, name: str, fmt: str = "{:.1f}", scale: float = 1.0) -> str:
    """The row's `name` with its 95 % interval (`name_lo`, `name_hi`) in small print."""
    return (f"{num(row.get(name), fmt, scale)} <small>[{num(row.get(name + '_lo'), fmt, scale)}"
            f", {num(row.get(name + '_hi'), fmt, scale)}]</small>")


def html_table(head: list[str], rows: list[list[str]]) -> str:
    return ("<table><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>" + "".join(
        "<tr>" + "".join(f"<td class=n>{c}</td>" for c in r) + "</tr>" for r in rows)
        + "</table>")
