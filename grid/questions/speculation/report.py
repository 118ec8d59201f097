"""A surface search in the report (its trace, search.json): the steps, the surface c(B, k) with
intervals (measured cells marked), its decomposition per load, Leviathan's closed form beside
it, the length checks; and per domain of the drafter's profile the predicted speedup at every
(B, k), the best depth per load and the schedule in each engine's words, written beside the
report (`surface-schedule/<domain>/<engine>/`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from html import escape
from pathlib import Path
from typing import Any

from engines.forced import FORCED_LABEL
from grid.questions import html_section
from grid.questions.steps import unfinished
from grid.store.artifacts import write_file

FOLDER = "surface-schedule"
"""Where the predicted schedules' settings go in the run folder."""


def folder(domain: str, engine: str) -> str:
    """A domain's settings for one engine, in the run folder (the domain made path-safe)."""
    return f"{FOLDER}/{re.sub(r'[^A-Za-z0-9._-]+', '_', domain)}/{engine}"


def _v(x: float | None, fmt: str = ".2f") -> str:
    return "n/a" if x is None else format(x, fmt)


def _cell(value: float | None, interval: Sequence[float | None], unit: str = "") -> str:
    return f"{_v(value)}{unit} [{_v(interval[0])},{_v(interval[1])}]"


def _grid(rows: Sequence[dict[str, Any]], text: Callable[[dict[str, Any]], str]) -> list[str]:
    """A load x depth table of `rows` (each with `load` and `depth`), one text per cell."""
    depths = sorted({r["depth"] for r in rows})
    loads = sorted({r["load"] for r in rows})
    at = {(r["load"], r["depth"]): text(r) for r in rows}
    width = max([len(t) for t in at.values()] + [4])
    out = ["    load  " + "  ".join(f"k={k}".ljust(width) for k in depths)]
    for b in loads:
        out.append(f"    c={b:<4}" + "  ".join(at.get((b, k), "-").ljust(width) for k in depths))
    return out


def _step(step: dict[str, Any], rates: Sequence[float]) -> str:
    servers = sorted({(p[1], p[2]) for p in step["points"]})
    names = ", ".join("baseline" if k == 0 else f"k={k}" + (" unforced" if r < 0 else
                                                            f" a={rates[r]:g}" if r else "")
                      for k, r in servers)
    return (f"  step {step['number']}: {step['why']}"
            + (f" -> {len(step['points'])} cells on {len(servers)} server(s): {names}"
               if step["points"] else ""))


def surface_lines(res: dict[str, Any]) -> list[str]:
    """The surface table, the decomposition, Leviathan beside it, the length checks."""
    lines = ["  c(B, k), a speculative step's cost in plain decode steps, 95 % interval "
             "(* measured, the rest interpolated):"]
    lines += _grid(res["table"], lambda r: _cell(r["cost"], r["interval"])
                   + ("*" if r["measured"] else ""))
    lines.append("  per load, c = (1 + fixed) + draft x k + verify excess (least squares over "
                 "the depths measured):")
    for b, d in res["decomposition"].items():
        if d is not None:
            excess = ", ".join(f"k={k} {v:+.3f}" for k, v in d["verify_excess"].items())
            lines.append(f"    c={b}: fixed {_cell(d['fixed'], d['fixed_interval'])}, draft "
                         f"{_cell(d['draft'], d['draft_interval'])} per depth; verify excess "
                         f"{excess}")
    lev = res["leviathan"]
    if lev["rows"]:
        source = "assumed" if lev["assumed"] else "the profile's mean conditional rate"
        lines.append(f"  at c={lev['load']} beside Leviathan et al. (i.i.d. acceptance "
                     f"{lev['acceptance']:.3f}, {source}; a draft pass = draft(c={lev['load']})):"
                     " " + "; ".join(f"k={r['depth']}: surface {_v(r['surface'])}x, Leviathan "
                                     f"{_v(r['leviathan'])}x" for r in lev["rows"]))
    for c in res["length_checks"]:
        word = "one cost" if c["agrees"] else "the cost DEPENDS on the length"
        lines.append(f"  length check c={c['load']} k={c['depth']} (length {c['lengths'][0]:.2f} "
                     f"vs {c['lengths'][1]:.2f}): {_v(c['difference'], '+.3f')} "
                     f"[{_v(c['interval'][0], '+.3f')}, {_v(c['interval'][1], '+.3f')}]: {word}")
    return lines


def setting_line(name: str, setting: dict[str, Any] | None, domain: str) -> str:
    if setting is None:
        return f"    {name}: cannot set a depth by batch size"
    if "refused" in setting:
        return f"    {name}: {setting['refused']}"
    files = "".join(f" (with {folder(domain, name)}/{f})" for f in setting.get("files", {}))
    return f"    set on {name}: {setting['command']}{files}"


def prediction_lines(prediction: dict[str, Any]) -> list[str]:
    """Per domain: AL(k), the speedup table, the best depth per load, the schedule and its
    settings."""
    lines = []
    for name, d in prediction["domains"].items():
        al = " ".join(_v(v) for v in d["accept_length"])
        lines.append(f"  predicted for {name} (profile {prediction['source']}, {d['samples']} "
                     f"{prediction['unit']}; AL(k) = {al}): speedup AL(k) / c(B, k), 95 %; "
                     "speculation pays where AL(k) exceeds c(B, k), the break-even length:")
        lines += _grid(d["cells"], lambda r: _cell(r["speedup"], r["interval"], "x"))
        lines.append("    best depth: " + ", ".join(f"c={b} {k}" for b, k in d["best"].items())
                     + f"; {d['text']}")
        lines += [setting_line(n, s, name) for n, s in d["settings"].items()]
    return lines


def trace_lines(trace: dict) -> list[str]:
    """The terminal lines: the question, each step, the stop, the surface, the prediction."""
    res = trace["result"]
    lines = [f"search: step cost surface of {trace['variant']} vs {trace['baseline']} on "
             f"{trace['workload']} ({FORCED_LABEL}), c={trace['lattice'][0]}.."
             f"{trace['lattice'][-1]} x k={trace['depths'][0]}..{trace['depths'][-1]}: "
             f"{res['cells']} cells, {res['starts']} server starts (the dense grid of these "
             f"loads, depths and {len(trace['rates'])} forced rates: {res['dense_cells']} "
             f"cells, {res['dense_starts']} starts)"]
    lines += [_step(s, trace["rates"]) for s in trace["steps"]]
    if not res.get("stop"):
        return [*lines, unfinished(res)]
    lines.append(f"  stopped: {res['stop']} ({res['stop_meaning'] or res.get('from', '')})")
    lines += [f"  disagrees: c={c['load']} k={c['depth']} cost {c['cost']:.3f} "
              f"[{c['interval'][0]:.3f}, {c['interval'][1]:.3f}], its neighbours along "
              f"{c['axis']} give {c['fit']:.3f}" for c in res["checks"] if not c["agrees"]]
    lines += surface_lines(res)
    if res.get("prediction"):
        lines += prediction_lines(res["prediction"])
    else:
        lines.append("  no prediction: no acceptance profile (grid.search.profile, or the "
                     "run's drafter with per-request acceptance histograms)")
    return lines


def answer_sentence(trace: dict) -> str | None:
    """The run's first sentence: the surface's span and, per domain, the schedule."""
    res = trace["result"]
    if not res.get("stop") or not res["table"]:
        return None
    costs = [r["cost"] for r in res["table"] if r["cost"] is not None]
    pred = res.get("prediction") or {"domains": {}}
    schedules = "; ".join(f"for {n}: {d['text']}" for n, d in pred["domains"].items())
    return (f"{trace['variant']} on {trace['workload']}: a speculative step costs "
            f"{min(costs):.2f} to {max(costs):.2f} decode steps over c={trace['lattice'][0]}.."
            f"{trace['lattice'][-1]}, k={trace['depths'][0]}..{trace['depths'][-1]} (the "
            f"surface search, {res['cells']} cells and {res['starts']} server starts against "
            f"the dense grid's {res['dense_cells']} and {res['dense_starts']}; {FORCED_LABEL})"
            + (f"; predicted {schedules}" if schedules else ""))


def trace_section(trace: dict) -> str:
    """The HTML section: the lines, the tables kept as preformatted text."""
    lines = trace_lines(trace)
    return html_section(lines[:1], "Step cost surface",
                        f"<pre>{escape(chr(10).join(lines[1:]))}</pre>")


def surface_decision(trace: dict) -> dict:
    """decision.json's `surface`: the surface, its parts, the prediction and the budget."""
    res = trace["result"]
    keys = ("stop", "cells", "starts", "dense_cells", "dense_starts", "design", "table",
            "decomposition", "leviathan", "length_checks", "prediction")
    return {"surface": {**{k: res.get(k) for k in keys}, "files_in": FOLDER}}


def write_surface_files(run_dir: Path, trace: dict) -> None:
    """Each domain's schedule in each engine's words: its files and flags.txt."""
    pred = trace["result"].get("prediction") or {"domains": {}}
    for domain, d in pred["domains"].items():
        for name, setting in d["settings"].items():
            if not setting or "command" not in setting:
                continue
            where = folder(domain, name)
            for f, text in setting.get("files", {}).items():
                write_file(run_dir, f"{where}/{f}", text)
            write_file(run_dir, f"{where}/flags.txt", setting["command"] + "\n")
