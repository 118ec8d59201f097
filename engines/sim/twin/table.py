"""The twin's printout (`python -m grid.twin` prints it through `Modeller.twin_summary`): its
factors with intervals, how well it reproduces every cell it was fitted on, its
leave-one-load-out error and its envelope, from the document document.py builds. Every number
is labelled SIMULATION: they come from the simulator's model of the node, fitted to the run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

UNITS = {"output_tok_s": ("output tok/s", 1.0, "{:.1f}"), "ttft_p50_s": ("TTFT p50 ms", 1e3,
                                                                      "{:.2f}"),
         "tpot_p50_s": ("TPOT p50 ms", 1e3, "{:.3f}"), "accept_length": ("accept length", 1.0,
                                                                         "{:.3f}"),
         "speedup": ("speedup", 1.0, "{:.3f}")}


def _value(metric: str, v: float) -> str:
    _, scale, fmt = UNITS[metric]
    return fmt.format(v * scale)


def _g(v: float) -> str:
    return f"{v:.4g}"


def factors(twin: Mapping[str, Any]) -> list[str]:
    lines = [f"{'factor':<28}{'fitted':>10}  {'95 % interval':<22}{'bounds'}"]
    for name, f in twin["factors"].items():
        lines.append(f"{name:<28}{_g(f['value']):>10}  "
                     f"{'[' + _g(f['lo']) + ', ' + _g(f['hi']) + ']':<22}"
                     f"[{_g(f['bounds'][0])}, {_g(f['bounds'][1])}]")
    fixed = ", ".join(f"{k} {_g(v)}" for k, v in twin["fixed"].items())
    lines.append(f"kept from the start: {fixed}")
    if twin["scheduler"]:
        lines.append("scheduler limits the servers reported: " + ", ".join(
            f"{k} {_g(v)}" for k, v in twin["scheduler"].items()))
    return lines


def cell_rows(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    lines = [f"{'cell':<18}{'variant':<12}{'c':>5}  {'metric':<15}{'measured':>11}"
             f"{'predicted':>11}{'error':>9}"]
    for r in rows:
        mark = "  extrapolation" if r.get("extrapolation") else ""
        lines.append(f"{str(r['cell_id'])[:16]:<18}{str(r['variant'])[:11]:<12}"
                     f"{r['concurrency']:>5}  {UNITS[r['metric']][0]:<15}"
                     f"{_value(r['metric'], r['measured']):>11}"
                     f"{_value(r['metric'], r['predicted']):>11}{r['error_pct']:>+8.1f}%{mark}")
    return lines


def holdout(metrics: Mapping[str, Mapping[str, Any]]) -> list[str]:
    lines = [f"{'metric':<15}{'n':>4}  {'mean |error| [95 % interval]':<30}{'max':>8}"
             f"{'bias':>9}"]
    for metric, m in metrics.items():
        lines.append(f"{UNITS[metric][0]:<15}{m['n']:>4}  "
                     f"{m['mae_pct']:>5.1f} % [{m['lo']:.1f}, {m['hi']:.1f}]{'':<12}"
                     f"{m['max_pct']:>6.1f} %{m['bias_pct']:>+7.1f} %")
    return lines


def describe_envelope(env: Mapping[str, Any]) -> str:
    def span(r: Sequence[int]) -> str:
        return str(r[0]) if r[0] == r[1] else f"{r[0]}-{r[1]}"

    shapes = ", ".join("/".join(str(v) for v in s) for s in env["speculative"]) or "none"
    return (f"concurrency {span(env['concurrency'])}, prompts {span(env['prompt_tokens'])} "
            f"tokens, {span(env['output_tokens'])} output tokens, EAGLE-3 {shapes}, prompt "
            f"domains {', '.join(env['workload_domains'])}")


def spread_lines(twin: Mapping[str, Any]) -> list[str]:
    """The cells of known acceptance, the repeat spread and the goal against it."""
    lines = []
    if twin.get("known_acceptance"):
        lines += ["", f"acceptance known in {twin['known_acceptance']} speculative cells "
                  "(counted per position or forced): the fit is the system's step costs alone"]
    spread = twin.get("repeat_spread") or {}
    if spread:
        lines += ["", "repeat spread (the same cell measured again, (max - min) / mean):"]
        lines += [f"  {UNITS[m][0]:<15}{s['n']:>4} cells  mean {s['mean_pct']:.1f} %, "
                  f"largest {s['max_pct']:.1f} %" for m, s in spread.items()]
    g = twin.get("goal")
    if g:
        lines.append(f"goal: held-out {UNITS[g['metric']][0]} mean |error| "
                     f"{g['error_pct']:.1f} % <= max(10 %, repeat spread "
                     f"{g['spread_pct']:.1f} %) = {g['bound_pct']:.1f} %: "
                     + ("met" if g["met"] else "NOT met"))
    return lines


def summary(doc: Mapping[str, Any], path: str, skipped: Sequence[str]) -> str:
    """The whole printout of the twin document `doc`, written to `path`."""
    twin = doc["twin"]
    node = twin["node"]
    h = twin["holdout"]
    lines = [f"SIMULATION (twin of {twin['run_id']}): the simulator fitted to "
             f"{len(twin['cells'])} cells of run {twin['run_id']} on {node['hardware']} / "
             f"{node['model']}, starting from {twin['start']} ({twin['replicates']} bootstrap "
             f"replicates, seed {twin['seed']})"]
    lines += [f"  left out: {s}" for s in skipped]
    lines += ["", *factors(twin), "", "fit: every cell it was fitted on (SIMULATION predicted)",
              *cell_rows(twin["fit"]), "",
              f"leave-one-load-out error (each of the loads {', '.join(map(str, h['loads']))} "
              "predicted from a fit on the others):", *holdout(h["metrics"])]
    if h["metrics_inside"] and h["metrics_inside"] != h["metrics"]:
        lines += ["held-out loads inside the others' range only (the lowest and highest load "
                  "are extrapolation):", *holdout(h["metrics_inside"])]
    held = twin.get("holdout_split")
    if held:
        what = [f"loads {', '.join(map(str, held['held_out']))}"] if held["held_out"] else []
        what += [f"workloads {', '.join(held['held_out_workloads'])}"] \
            if held["held_out_workloads"] else []
        lines += ["", f"held-out {' and '.join(what)} predicted from a fit on loads "
                  f"{', '.join(map(str, held['fitted_on']))} of "
                  f"{', '.join(held['fitted_workloads'])}:",
                  *cell_rows(held["cells"]), *holdout(held["metrics"])]
    lines += spread_lines(twin)
    lines += ["", f"envelope (outside it: extrapolation): {describe_envelope(twin['envelope'])}",
              f"wrote {path}",
              f"use it: python -m grid.run +sweep=concurrency engine=sim "
              f"engine.options.profile={path} "
              f"hardware={node['hardware']} model={node['model']}"]
    return "\n".join(lines)
