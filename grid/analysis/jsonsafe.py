"""JSON-safe values for decision.json and the other documents a report writes."""

from __future__ import annotations

import math

import numpy as np


def json_safe(value: dict) -> dict:
    """A dict made JSON-safe (`clean`)."""
    cleaned = clean(value)
    assert isinstance(cleaned, dict)
    return cleaned


def clean(value: object) -> object:
    """JSON-safe: NaN -> None, ±inf -> "inf"/"-inf", numpy scalars -> Python."""
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
    return value
