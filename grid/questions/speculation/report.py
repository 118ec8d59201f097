"""The speculation question in the report (its trace, search.json): the recommendation first,
each part marked predicted, confirmed or measured; the steps, the surface c(B, k) with
intervals (measured cells marked), its decomposition per load, Leviathan's closed form beside
it, the length checks; per domain of the drafter's profile the predicted speedup at every
(B, k) with the drafter placed on each break-even length, the configured depth's crossover
and threshold, the best depth per load with the depths not ruled out beside it; the
confirmation; the recommended settings in each engine's words, written beside the report
(`speculation/<domain>/<engine>/`)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from html import escape
from pathlib import Path
from typing import Any

from engines.forced import FORCED_LABEL
from grid.questions import html_section
from grid.questions.speculation.steps import next_step, servers
from grid.questions.steps import unfinished
from grid.store.artifacts import write_file

FOLDER = "speculation"
"""Where the recommended settings go in the run folder."""


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
    if step.get("phase") == "confirm":
        return (f"  step {step['number']} (confirm): {step['why']}"
                + (f" -> {len(step['points'])} cells of the drafter's own" if step["points"]
                   else ""))
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
             f"(* measured: {_FROM[res['points_from']]}; the rest interpolated):"]
    lines += _grid(res["table"], lambda r: _cell(r["cost"], r["interval"])
                   + ("*" if r["measured"] else ""))
    if res["points"]:
        lines.append("  other cells as points of the surface, c = L x T_b / T_v (not fitted: "
                     "own = the drafter's profile's, confirm = the confirmation's, drafter = "
                     "another drafter of grid.search.drafters at its measured L): "
                     + "; ".join(f"c={p['load']} k={p['depth']} {_cell(p['cost'], p['interval'])}"
                                 f" ({p['source']}" + (f" {p['drafter']} L={p['length']:.2f}"
                                                       if p.get("drafter") else "") + ")"
                                 for p in res["points"]))
    lines.append("  per load, c = (1 + fixed) + draft x k + verify excess (least squares over "
                 "the depths measured):")
    for b, d in res["decomposition"].items():
        if d is not None:
            excess = ", ".join(f"k={k} {v:+.3f}" for k, v in d["verify_excess"].items())
            lines.append(f"    c={b}: fixed {_cell(d['fixed'], d['fixed_interval'])}, draft "
                         f"{_cell(d['draft'], d['draft_interval'])} per depth; verify excess "
                         f"{excess}")
    if res.get("zero"):
        lines.append("  depth 0 (speculation configured, no drafts: a depth-0 tier, a threshold's "
                     "upper tier) against the baseline, 1 / c(B, 0), 95 % (* measured): "
                     + "; ".join(f"c={z['load']} {_cell(z['speedup'], z['speedup_interval'], 'x')}"
                                 + ("*" if z["measured"] else "") + f" {z['verdict']}"
                                 for z in res["zero"]))
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


_FROM = {"own": "the drafter's own cells, unforced, c = L x T_b / T_v at their measured "
                "accept length L", "forced": f"forced cells ({FORCED_LABEL})"}
"""Where the fitted points of the surface came from (`grid.search.forced`)."""


def setting_line(name: str, setting: dict[str, Any] | None, domain: str) -> str:
    if setting is None:
        return f"    {name}: cannot set a depth by batch size"
    if "refused" in setting:
        return f"    {name}: {setting['refused']}"
    files = "".join(f" (with {folder(domain, name)}/{f})" for f in setting.get("files", {}))
    return f"    set on {name}: {setting['command']}{files}"


def _not_ruled_out(best: int, plausible: Sequence[int]) -> str:
    """` (not ruled out: baseline, 3)`: the depths beside the best the prediction does not rule
    out; nothing where the best stands alone."""
    others = ["baseline" if k == 0 else str(k) for k in plausible if k != best]
    return f" (not ruled out: {', '.join(others)})" if others else ""


def prediction_lines(prediction: dict[str, Any]) -> list[str]:
    """Per domain: AL(k), the speedup table, the best depth per load with the depths not ruled
    out beside it, the schedule and its settings."""
    lines = []
    if prediction.get("widened"):
        lines.append("  the length checks say the cost depends on the accepted length: every "
                     "prediction's interval widened by it, " + ", ".join(
                         f"c={b} ±{r:.0%}" for b, r in prediction["widened"].items()))
    for name, d in prediction["domains"].items():
        al = " ".join(_v(v) for v in d["accept_length"])
        lines.append(f"  predicted for {name} (profile {prediction['source']}, {d['samples']} "
                     f"{prediction['unit']}; AL(k) = {al}): speedup AL(k) / c(B, k), 95 %; "
                     "speculation pays where AL(k) exceeds c(B, k), the break-even length:")
        lines += _grid(d["cells"], lambda r: _cell(r["speedup"], r["interval"], "x")
                       + {"pays": "+", "loses": "-"}.get(r.get("placed", ""), "?"))
        lines.append("    (+ pays: the drafter's accept length above the break-even length "
                     "c(B, k) by the whole interval; - loses; ? the interval holds 1)")
        cross, plausible = d.get("crossover"), d.get("plausible_depths") or {}
        if cross:
            lines.append(f"    configured depth {cross['depth']}: {cross['text']}; "
                         f"{cross['statement']}")
        lines.append("    best depth (a depth whose interval holds 1 is not chosen over the "
                     "baseline; not ruled out: each depth whose interval reaches the best's): "
                     + ", ".join(f"c={b} {k}{_not_ruled_out(k, plausible.get(b, ()))}"
                                 for b, k in d["best"].items()) + f"; {d['text']}")
    return lines


def recommendation_lines(res: dict[str, Any]) -> list[str]:
    """The recommendation, first: per domain, its text and its settings."""
    lines = []
    for rec in res.get("recommendations") or []:
        lines.append(f"  recommendation ({rec['status']}) {rec['text']}")
        lines += [setting_line(n, s, rec["domain"]) for n, s in rec["settings"].items()]
    return lines


def confirmation_lines(res: dict[str, Any]) -> list[str]:
    conf = res.get("confirmation") or {}
    if not conf.get("own"):
        return []
    off = {tuple(d) for d in conf["disagree"]}
    switch = conf.get("switch")
    return ["  the drafter's own cells (unforced), speedup over the baseline, 95 %: " + "; ".join(
        f"c={o['load']} k={o['depth']} {_cell(o['speedup'], o['interval'], 'x')}"
        + (" DISAGREES with the prediction" if (o["load"], o["depth"]) in off else "")
        for o in conf["own"]) + f" ({conf['cells']} of {conf['max_cells']} confirming cells)",
        *([f"  the threshold with the switch applied: {switch['text']}"] if switch else [])]


def trace_lines(trace: dict) -> list[str]:
    """The terminal lines: the question, the recommendation, each step, the stop, the surface,
    the confirmation, the prediction."""
    res = trace["result"]
    lines = [f"search: speculation of {trace['variant']} vs {trace['baseline']} on "
             f"{trace['workload']}: the step cost surface ({_FROM[res['points_from']]}), c="
             f"{trace['lattice'][0]}..{trace['lattice'][-1]} x k={trace['depths'][0]}.."
             f"{trace['depths'][-1]}: {res['cells']} cells, {res['starts']} server starts (the "
             f"dense grid of these loads, depths and {len(trace['rates'])} forced rates: "
             f"{res['dense_cells']} cells, {res['dense_starts']} starts)",
             *recommendation_lines(res)]
    lines += [_step(s, trace["rates"]) for s in trace["steps"]]
    if not res.get("stop"):
        return [*lines, unfinished(res)]
    lines.append(f"  stopped: {res['stop']} ({res['stop_meaning'] or res.get('from', '')})")
    lines += [f"  disagrees: c={c['load']} k={c['depth']} cost {c['cost']:.3f} "
              f"[{c['interval'][0]:.3f}, {c['interval'][1]:.3f}], its neighbours along "
              f"{c['axis']} give {c['fit']:.3f}" for c in res["checks"] if not c["agrees"]]
    lines += surface_lines(res)
    lines += confirmation_lines(res)
    if res.get("prediction"):
        lines += prediction_lines(res["prediction"])
    else:
        lines.append("  no prediction: no acceptance profile (grid.search.profile, or the "
                     "run's drafter with per-request acceptance histograms)")
    return lines


def answer_sentence(trace: dict) -> str | None:
    """The run's first sentence: the recommendation, and what the surface cost."""
    res = trace["result"]
    if not res.get("stop") or not res["table"]:
        return None
    rec = (res.get("recommendations") or [None])[0]
    head = (f"{trace['variant']} on {trace['workload']}: " + (
        f"{rec['text']} ({rec['status']})" if rec else "no recommendation (no acceptance "
        "profile to predict from)"))
    return (head + f"; the speculation question's surface took {res['cells']} cells and "
            f"{res['starts']} server starts against the dense grid's {res['dense_cells']} and "
            f"{res['dense_starts']} (" + ("the drafter's own cells" if res["points_from"] == "own"
                                          else FORCED_LABEL) + ")")


def trace_section(trace: dict) -> str:
    """The HTML section: the lines, the tables kept as preformatted text."""
    lines = trace_lines(trace)
    return html_section(lines[:1], "Speculation", f"<pre>{escape(chr(10).join(lines[1:]))}</pre>")


def speculation_decision(trace: dict) -> dict:
    """decision.json's `speculation`: the recommendation first, then the surface, its parts,
    the prediction, the confirmation and the budget."""
    res = trace["result"]
    keys = ("recommendation", "recommendations", "stop", "surface_stop", "cells", "starts",
            "dense_cells", "dense_starts", "design", "points_from", "table", "points", "zero",
            "decomposition", "leviathan",
            "length_checks", "prediction", "confirmation")
    return {"speculation": {**{k: res.get(k) for k in keys}, "files_in": FOLDER}}


def write_settings(run_dir: Path, trace: dict) -> None:
    """Each recommendation's settings in each engine's words: its files and flags.txt."""
    for rec in trace["result"].get("recommendations") or []:
        for name, setting in rec["settings"].items():
            if not setting or "command" not in setting:
                continue
            where = folder(rec["domain"], name)
            for f, text in setting.get("files", {}).items():
                write_file(run_dir, f"{where}/{f}", text)
            write_file(run_dir, f"{where}/flags.txt", setting["command"] + "\n")


def plan_lines(planned: Any, prediction: dict[str, Any] | None, start: float = 0.0
               ) -> list[str]:
    """What `plan=true` says: the question, the rectangle, the first step's cells and starts
    against the dense grid's, the starts' time; from an earlier surface, the prediction."""
    space = planned.space
    head = (f"search: speculation of {planned.variant} vs baseline on {planned.workload}: the "
            f"step cost surface ({_FROM['forced' if space.forced else 'own']}), concurrency "
            f"{space.lattice[0]}.."
            f"{space.lattice[-1]} x depths {space.depths[0]}..{space.depths[-1]}")
    if planned.earlier is not None:
        if prediction is None:
            return [head, f"  from {planned.earlier}: no surface or no profile to predict "
                    "from (grid.search.profile)"]
        return [head, f"  from {planned.earlier}: nothing is measured",
                *prediction_lines(prediction)]
    first = next_step(space, set(), {})
    starts = servers(first.points)
    return [
        head,
        f"  lattice ({len(space.lattice)}): {' '.join(map(str, space.lattice))}; depths "
        f"{' '.join(map(str, space.depths))}" + (
            f"; forced rates {' '.join(f'{r:g}' for r in space.rates)} (each draft accepted "
            "with that probability: depth k forced to the rates a, a^2 .. a^k; the first the "
            "surface's, the rest the length check's)" if space.forced else
            "; the drafter's own cells, unforced (grid.search.forced=true: forced cells)"),
        f"  budget: grid.search.max_cells={space.max_cells} (the dense grid of these loads, "
        f"depths and rates with the baseline: {space.dense_cells} cells, "
        f"{space.dense_starts} server starts)"
        + (f", then up to grid.search.confirm_cells={planned.confirm_cells} of the drafter's "
           "own cells confirming the prediction where it decides" if space.profile else ""),
        f"  step 1: {first.why} -> {len(first.points)} cells on {starts} servers, each "
        f"serving all its loads once (~{starts * start / 60:.1f} min of starts at "
        f"{start:g} s each); later: a new depth is one start at every load, a new load one "
        "start per depth and the baseline",
        *(["  profile: " + str(planned.profile.source) + " (grid.search.profile)"]
          if planned.profile is not None else []),
    ]
