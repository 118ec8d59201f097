"""The speculation question's one recommendation (search.json `result.recommendation`, first in
the report's section and in decision.json): the configured depth's threshold
(speculative_disable_above_batch) and the depth by batch size in each engine's words
(`Engine.depth_setting`: SGLang's adaptive file, vLLM's num_speculative_tokens_per_batch_size),
each part marked predicted, confirmed or measured (grid/questions/speculation/confirm.py); a
tier at whose loads the prediction rules out neither the baseline nor a drafting depth (predict.py
`plausible_depths`) says it is undetermined between them."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from grid.analysis.surface import depth_schedule, schedule_text
from grid.analysis.verdict import WITHIN_ONLY, judged
from grid.questions.speculation.confirm import CONFIRMS, MEASURED, PREDICTED, Est

Form = Callable[[Any], dict[str, Any] | None]


def worst(statuses: list[str]) -> str:
    """A part resting on several loads is as known as its least known load."""
    for status in (PREDICTED, MEASURED, CONFIRMS):
        if status in statuses:
            return status
    return PREDICTED


def measured_threshold(own: Mapping[tuple[int, int], Est], depth: int) -> int:
    """From the drafter's own cells at the configured depth: the highest load up to which every
    measured one pays (interval above 1); 0 where the lowest does not."""
    out = 0
    for (b, k), est in sorted(own.items()):
        if k != depth:
            continue
        if est[1] <= 1.0:
            break
        out = b
    return out


def threshold_part(cross: dict[str, Any] | None, own: Mapping[tuple[int, int], Est],
                   neighbours: tuple[int, ...], off: list[tuple[int, int]]) -> dict[str, Any]:
    """The threshold part: the prediction's, confirmed at the crossover's neighbours, or the
    drafter's own cells' where one disagreed."""
    if cross is None:
        return {"speculative_disable_above_batch": None, "status": PREDICTED,
                "statement": "no crossover: the configured depth is predicted at fewer than "
                             "two loads"}
    depth = cross["depth"]
    keys = [(b, depth) for b in neighbours]
    if any(key in off for key in keys):
        value = measured_threshold(own, depth)
        return {"speculative_disable_above_batch": value, "depth": depth, "status": MEASURED,
                "statement": f"set speculative_disable_above_batch={value} (the drafter's own "
                             f"cells at depth {depth}: the prediction's "
                             f"{cross['speculative_disable_above_batch']} disagreed with them)"}
    status = CONFIRMS if keys and all(key in own for key in keys) else PREDICTED
    return {"speculative_disable_above_batch": cross["speculative_disable_above_batch"],
            "depth": depth, "status": status, "statement": cross["statement"],
            "crossover": cross["crossover"], "interval": cross["interval"]}


def depth_zero(zero: Mapping[int, Est], loads: list[int], spread: float | None
               ) -> dict[str, Any] | None:
    """What speculation configured with no drafts (depth 0: a depth-0 tier, a threshold's upper
    tier) runs at against the baseline over `loads`: the load where its speedup is lowest, with
    its interval and verdict (grid/analysis/verdict.py `judged`: widened by the stated spread
    between repeats; none stated, undetermined (within-run noise only)); None where depth 0 is
    not known there."""
    known = [b for b in loads if b in zero]
    if not known:
        return None
    b = min(known, key=lambda x: zero[x][0])
    value, lo, hi = zero[b]
    verdict, lo, hi = judged(value, lo, hi, spread)
    return {"load": b, "speedup": round(value, 4), "interval": [round(lo, 4), round(hi, 4)],
            "verdict": verdict}


def undetermined(loads: list[int], plausible: Mapping[int, Sequence[int]],
                 status: Mapping[int, str]) -> dict[str, list[int]] | None:
    """The loads of a tier where the prediction rules out neither the baseline nor drafting:
    its depths not ruled out (predict.py `plausible_depths`) hold both 0 and a drafting depth;
    those loads and the drafting depths, None where there is none. A load answered by the
    drafter's own cells (`measured`) does not rest on the prediction: left out."""
    at = [b for b in loads if status[b] != MEASURED and 0 in plausible.get(b, ())
          and max(plausible[b]) > 0]
    if not at:
        return None
    return {"loads": at, "depths": sorted({k for b in at for k in plausible[b] if k > 0})}


def _undetermined_words(found: dict[str, list[int]] | None) -> str:
    if found is None:
        return ""
    *first, last = [str(k) for k in found["depths"]]
    depths = f"{', '.join(first)} or {last}" if first else last
    return (f"; undetermined between baseline and depth {depths} at "
            + ", ".join(f"c={b}" for b in found["loads"]))


def _zero_words(k0: dict[str, Any] | None, where: str = "there") -> str:
    if k0 is None:
        return ""
    lo, hi = k0["interval"]
    return (f"; speculation configured {where} runs depth 0: {k0['speedup']:.2f}x [{lo:.2f}, "
            f"{hi:.2f}] of the baseline at c={k0['load']}, {k0['verdict']}")


def _threshold_words(threshold: dict[str, Any], above: dict[str, Any] | None,
                     switch: dict[str, Any] | None, spread: float | None) -> str:
    """The threshold part of the recommendation's text: set it, with how it is known, what
    runs above it and its confirmation with the switch applied; with no spread between
    repeats stated, undetermined (within-run noise only), the within-run value named."""
    off = threshold.get("speculative_disable_above_batch")
    within = (f"{WITHIN_ONLY}: one repeat per cell and no grid.search.repeat_spread stated "
              "(the between-repeat sd a run on this node with grid.axes.repeat=[0,1,2] "
              "prints), so no sign counts; the within-run intervals alone ")
    if off is None:
        return (str(threshold["statement"]) if spread is not None
                else f"{within}say: {threshold['statement']}")
    switched = f"; {switch['text']}" if switch else ""
    words = (f"speculative_disable_above_batch={off} at depth {threshold.get('depth')} "
             f"({threshold['status']}{_zero_words(above, 'above it')}{switched})")
    if spread is None:
        return f"{within}give {words}"
    return f"set {words}"


def _single_words(single: dict[str, Any] | None) -> str:
    if single is None:
        return ""
    instead = (f"; depth {single['instead_of']} as predicted was contradicted"
               if "instead_of" in single else "")
    if single["depth"] is None:
        return f"; at one depth for every batch size: none pays ({single['status']}{instead})"
    return (f"; at one depth for every batch size: depth {single['depth']}, paying up to batch "
            f"{single['last']} ({single['status']}{instead})")


def recommendation(settled: Mapping[int, tuple[int, str]], threshold: dict[str, Any],
                   forms: Mapping[str, Form], domain: str, zero: Mapping[int, Est],
                   spread: float | None, switch: dict[str, Any] | None = None,
                   plausible: Mapping[int, Sequence[int]] | None = None,
                   single: dict[str, Any] | None = None) -> dict[str, Any]:
    """The recommendation for one domain of the drafter's profile; each depth-0 tier of a
    schedule that drafts, and the loads above the threshold, judged against depth 0 measured
    (`zero`: load -> its speedup over the baseline), not taken as the baseline; `switch`: the
    threshold confirmed with the switch applied (confirm.py `switch_verdict`); `single`: the
    best single depth with its status (confirm.py `single_status`). `spread`: the
    stated spread between repeats (grid.search.repeat_spread); None: the threshold is
    undetermined (within-run noise only), its within-run value and verdict kept as `within_run`
    and `within_run_verdict`. `plausible`: load -> the depths the prediction does not rule out
    (predict.py `plausible_depths`); a tier with loads where they hold both the baseline and a
    drafting depth says so (`undetermined`), its depth still the best's."""
    tiers = depth_schedule({b: k for b, (k, _) in settled.items()})
    status = {b: s for b, (_, s) in settled.items()}
    starts = sorted(settled)
    drafts = any(d > 0 for _, d in tiers)
    tier_status: list[dict[str, Any]] = []
    for i, (start, depth) in enumerate(tiers):
        end = tiers[i + 1][0] if i + 1 < len(tiers) else None
        loads = [b for b in starts if b >= start and (end is None or b < end)]
        tier_status.append({"from": start, "depth": depth,
                            "status": worst([status[b] for b in loads])})
        found = undetermined(loads, plausible or {}, status)
        if found:
            tier_status[-1]["undetermined"] = found
        if depth == 0 and drafts:
            tier_status[-1]["depth_zero"] = depth_zero(zero, loads, spread)
    settings = {n: f(tiers) for n, f in forms.items()} if drafts else {}
    words = ", ".join(f"{'baseline' if t['depth'] == 0 else 'depth ' + str(t['depth'])} from "
                      f"batch {t['from']} ({t['status']}"
                      f"{_undetermined_words(t.get('undetermined'))}"
                      f"{_zero_words(t.get('depth_zero'))})" for t in tier_status)
    unsure = any("undetermined" in t for t in tier_status)
    off = threshold.get("speculative_disable_above_batch")
    above = None if off is None else depth_zero(zero, [b for b in starts if b > off], spread)
    text = (f"for {domain}: {_threshold_words(threshold, above, switch, spread)}"
            + f"; by batch size: {words or 'none'}"
            + ("" if drafts else f" (speculation {'shown to pay' if unsure else 'pays'} at "
                                 "no load: serve the baseline)")
            + _single_words(single))
    threshold = {**threshold, "depth_zero": above, "switch": switch}
    if spread is None:
        threshold.update({"speculative_disable_above_batch": None, "within_run": off,
                          "within_run_verdict": threshold.get("verdict"),
                          "verdict": WITHIN_ONLY})
    return {"domain": domain, "text": text, "threshold": threshold,
            "repeat_spread": spread, "schedule": [list(t) for t in tiers],
            "schedule_text": schedule_text(tiers), "tiers": tier_status, "settings": settings,
            "single": single,
            "status": worst([str(threshold["status"]), *(str(t["status"]) for t in tier_status)])}
