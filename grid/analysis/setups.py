"""Which cells a comparison may pair: a speculative variant only with the baseline of its own
setup (engine, model, hardware), every variant labelled with the axis values that tell its
setup apart, in AXES order (`vllm · llama3.1-8b · eagle3`), and the setups compared baseline
to baseline (docs/report.md, "Which cells are compared"). Pure pandas."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pandas as pd

SEP = " · "
"""Between the setup's axis values and the variant's own name in a label (variant names are
path-safe slugs, so they never hold it)."""
AXES = ("engine", "model", "hardware")
"""The axes besides the variant that make a setup, in the order labels show them."""


def _json_field(text: object, key: str) -> object:
    try:
        value = json.loads(text) if isinstance(text, str) and text else {}
    except ValueError:
        return None
    return value.get(key) if isinstance(value, dict) else None


def hardware(cells: pd.DataFrame) -> pd.Series:
    """Per cell: the hardware its engine ran or modelled (engine.options.hardware, else the
    `hardware` axis in its factors; None when neither says)."""
    out = []
    for options, factors in zip(cells.get("engine_options", pd.Series(None, index=cells.index)),
                                cells.get("factors", pd.Series(None, index=cells.index)),
                                strict=True):
        value = _json_field(options, "hardware") or _json_field(factors, "hardware")
        out.append(None if value is None else str(value))
    return pd.Series(out, index=cells.index, dtype=object)


def varying(cells: pd.DataFrame) -> list[str]:
    """The setup axes with more than one value among the cells."""
    return [a for a in AXES if a in cells and cells[a].dropna().astype(str).nunique() > 1]


def split(label: str) -> tuple[str, str]:
    """(setup, variant name) of a label: `vllm · llama3.1-8b · eagle3` -> (`vllm ·
    llama3.1-8b`, `eagle3`); ('', name) for an unlabelled one."""
    setup, _, name = str(label).rpartition(SEP)
    return setup, name


def join(setup: str, name: str) -> str:
    return f"{setup}{SEP}{name}" if setup else name


def baseline_of(label: str, baseline: str = "baseline") -> str:
    """The label of the baseline a variant is compared with: its own setup's."""
    return join(split(label)[0], baseline)


def is_baseline(label: str, baseline: str = "baseline") -> bool:
    return split(label)[1] == baseline


def with_hardware(cells: pd.DataFrame) -> pd.DataFrame:
    """`cells` with its `hardware` column (added from the engine options when absent)."""
    if "hardware" in cells or cells.empty:
        return cells
    return cells.assign(hardware=hardware(cells))


def setups(cells: pd.DataFrame) -> tuple[list[str], pd.Series]:
    """The varying setup axes and, per cell, its setup: the values of those axes joined by SEP
    (`vllm · llama3.1-8b`; '' when no axis varies)."""
    cells = with_hardware(cells)
    axes = varying(cells)
    if not axes:
        return axes, pd.Series("", index=cells.index, dtype=object)
    values = cells[axes].astype(object).where(cells[axes].notna(), "?")
    return axes, pd.Series([SEP.join(str(v) for v in row)
                            for row in values.itertuples(index=False)],
                           index=cells.index, dtype=object)


def relabel(variants: pd.Series, setup: pd.Series) -> pd.Series:
    """Each variant labelled with its setup (an existing label replaced, so labelling twice
    changes nothing)."""
    return pd.Series([join(str(s), split(str(v))[1]) for v, s in
                      zip(variants, setup, strict=True)], index=variants.index, dtype=object)


def label_setups(cells: pd.DataFrame, *frames: pd.DataFrame
                 ) -> tuple[list[str], pd.DataFrame, list[pd.DataFrame]]:
    """The varying setup axes, and copies of `cells` (with its `hardware` and `setup`) and of
    each frame keyed by cell_id (requests, turns) with every variant labelled by its setup.
    Only the added columns change when no setup axis varies."""
    cells = with_hardware(cells).copy()
    axes, setup = setups(cells)
    cells["setup"] = setup
    out = [f.copy() for f in frames]
    if not axes:
        return axes, cells, out
    cells["variant"] = relabel(cells.variant, setup)
    names = dict(zip(cells.cell_id.astype(str), cells.variant, strict=True))
    for frame in out:
        if len(frame) and "cell_id" in frame and "variant" in frame:
            frame["variant"] = frame.cell_id.astype(str).map(names).fillna(
                frame.variant.astype(str))
    return axes, cells, out


def axis_values(setup: str, axes: Sequence[str]) -> dict[str, str]:
    """The setup's value of each varying axis (`vllm · llama3.1-8b` with (engine, model))."""
    values = setup.split(SEP) if setup else []
    return dict(zip(axes, values, strict=False))
