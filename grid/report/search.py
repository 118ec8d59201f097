"""An adaptive search in the report (docs/search.md): the run folder's `search.json` (written
by grid/execute/search.py after every step) read once, and each part of the report asked of
the question that wrote it (grid/questions/: its answer, lines, section, decision entries)."""

from __future__ import annotations

import json
from pathlib import Path

from grid.questions import TRACE_FILE, Question, traced


def load_trace(run_dir: Path) -> dict | None:
    """The run's search trace, or None for a run without a search (or an unreadable trace,
    or one no registered question wrote)."""
    try:
        trace = json.loads((Path(run_dir) / TRACE_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(trace, dict) or "steps" not in trace:
        return None
    return trace if traced(trace) is not None else None


def asked(trace: dict) -> Question:
    """The question that wrote a trace `load_trace` read."""
    question = traced(trace)
    assert question is not None
    return question


def searched_recommendations(recs: list[dict], trace: dict | None) -> list[dict]:
    """The decision's recommendations as the question's answer changes them (a threshold
    search's confirmed value replaces the crossover rule's)."""
    return recs if not trace else asked(trace).recommendations(recs, trace)


def search_answer(trace: dict | None) -> str | None:
    """The question's answer in one sentence: the report's first (None: no search, or no
    answer yet)."""
    return None if not trace else asked(trace).answer(trace)


def trace_lines(trace: dict) -> list[str]:
    """The search's lines in the terminal summary: one per step and the outcome."""
    return asked(trace).lines(trace)


def trace_section(trace: dict | None) -> str:
    """The HTML section (empty without a search)."""
    return "" if trace is None else asked(trace).section(trace)


def search_decision(trace: dict | None) -> dict:
    """decision.json's entries for the search: `search` (the trace) and the question's own."""
    return {} if not trace else {"search": trace, **asked(trace).decision(trace)}


def write_search_files(run_dir: Path, trace: dict | None) -> None:
    """Files the question writes beside the report (a depth search's setting)."""
    if trace:
        asked(trace).write_files(run_dir, trace)
