"""A depth search's answer in the report, read from its trace (docs/search.md)."""

from __future__ import annotations

from html import escape
from pathlib import Path

from grid.questions import html_section
from grid.questions.depth.confirm import describe
from grid.questions.steps import step_lines, unfinished
from grid.store.artifacts import write_file

FOLDER = "depth-schedule"
"""Where the settings go in the run folder."""


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:+.1%}"


def _interval(entry: dict) -> str:
    lo, hi = entry.get("interval") or (None, None)
    return f"{_pct(entry.get('speedup'))} [{_pct(lo)}, {_pct(hi)}]"


def _depth(d: int | None) -> str:
    return "baseline" if d == 0 else f"depth {d}"


def schedule_text(schedule: list) -> str:
    return ", ".join(f"{_depth(d)} from batch {b}" for b, d in schedule) or "none"


def evidence_lines(result: dict) -> list[str]:
    """One line per decided level: its best depth against the runner-up."""
    out = []
    for lv in result.get("levels", []):
        if lv.get("best") is None:
            continue
        line = f"    c={lv['load']}: {_depth(lv['best'])}"
        if lv.get("runner") is not None:
            line += (f" over {_depth(lv['runner'])} {_interval(lv)} ({lv['sign']}, "
                     f"{lv['repeats']} repeat(s))")
        out.append(line + f" among {{{', '.join(str(d) for d in lv['candidates'])}}}")
    return out


def confirm_lines(result: dict) -> list[str]:
    """One line per tier of the schedule: where it was confirmed, against what, verdicts."""
    out = []
    for tier in result.get("tiers", []):
        vs = "; ".join(f"vs {c['against']} {_interval(c) if 'speedup' in c else ''} "
                       f"{c['verdict']}".replace("  ", " ") for c in tier["comparisons"])
        word = "stands" if tier["stands"] else "does not stand"
        out.append(f"    from batch {tier['from']} ({_depth(tier['depth'])}), at "
                   f"c={tier['load']}: {word}: {vs}")
    return out


def setting_lines(result: dict) -> list[str]:
    setting = result.get("setting")
    if not setting:
        return ["  setting: none (the schedule never drafts: serve the baseline)"]
    routed = ", ".join(f"{lo}{'+' if hi is None else ('' if hi == lo else f'-{hi}')}: {d}"
                       for lo, hi, d in setting["tiers"])
    out = [f"  set on {setting['engine']}: {setting['command']}"]
    for name in setting.get("files", {}):
        out.append(f"    with {name} (written to {FOLDER}/{name})")
    out.append(f"    depth by running batch as the engine routes it: {routed}")
    return out


def depth_lines(trace: dict) -> list[str]:
    """The steps, the stop, the schedule, its evidence and confirmation, the setting."""
    res = trace["result"]
    depths = " ".join(str(d) for d in res["depths"])
    lines = [f"search: depth of {trace['variant']} vs {trace['baseline']} on "
             f"{trace['workload']}, depths {depths}, c={res['lattice'][0]}..{res['lattice'][-1]}"
             f": {res['cells']} cells (max_cells {res['max_cells']} + confirm_cells "
             f"{res.get('confirm_cells')}; a dense grid: "
             f"{len(res['lattice']) * len(res['depths'])})"]
    lines += step_lines(trace["steps"], describe, phases=True)
    if not res.get("stop"):
        lines.append(unfinished(res))
        return lines
    lines.append(f"  stopped: {res['stop']} ({res['stop_meaning']}); schedule: "
                 f"{schedule_text(res['schedule'])}; best single depth "
                 f"{res.get('best_single_depth')}")
    lines.append("  evidence (best over runner-up, 95 % interval):")
    lines += evidence_lines(res)
    if res.get("confirm_stop"):
        verdict = "stands" if res.get("stands") else "does not stand everywhere"
        lines.append(f"  confirmation ({res['confirm_stop']}: {res['confirm_stop_meaning']}): "
                     f"the schedule {verdict} (schedule over each alternative, 95 % interval):")
        if res.get("threshold_schedule"):
            lines.append("    threshold = the best single depth, off where the schedule turns "
                         f"speculation off: {schedule_text(res['threshold_schedule'])}")
        lines += confirm_lines(res)
    return lines + setting_lines(res)


def answer_sentence(trace: dict) -> str | None:
    """The run's first sentence: the schedule, once the search stopped."""
    res = trace["result"]
    if not res.get("stop"):
        return None
    return (f"{trace['variant']} on {trace['workload']}: run the depth schedule "
            f"{schedule_text(res.get('schedule') or [])} (the depth search's choice after "
            f"{res['cells']} cells: {res['stop']})")


def depth_section(trace: dict) -> str:
    """The HTML section: the same lines, the setting as code."""
    setting = trace["result"].get("setting") or {}
    files = "".join(f"<p>{escape(name)} ({FOLDER}/{escape(name)}):</p><pre>{escape(text)}</pre>"
                    for name, text in setting.get("files", {}).items())
    paste = (f"<p>Set it on {escape(setting['engine'])}:</p><pre>"
             f"{escape(setting['command'])}</pre>{files}" if setting else "")
    return html_section(depth_lines(trace), "Speculative depth by load", paste)


def depth_decision(trace: dict) -> dict:
    """decision.json's `depth`: the schedule, its evidence and confirmation, the setting."""
    res = trace["result"]
    return {"schedule": res.get("schedule"), "stop": res.get("stop"),
            "best_single_depth": res.get("best_single_depth"),
            "threshold_schedule": res.get("threshold_schedule"),
            "levels": res.get("levels"), "confirmation": res.get("tiers"),
            "confirm_stop": res.get("confirm_stop"), "stands": res.get("stands"),
            "setting": res.get("setting"), "files_in": FOLDER}


def write_depth_files(run_dir: Path, trace: dict) -> list[Path]:
    """The setting's files (SGLang's adaptive config) and its flags, beside the report."""
    setting = trace["result"].get("setting")
    if not setting:
        return []
    out = [write_file(run_dir, f"{FOLDER}/{name}", text)
           for name, text in setting.get("files", {}).items()]
    out.append(write_file(run_dir, f"{FOLDER}/flags.txt", setting["command"] + "\n"))
    return out
