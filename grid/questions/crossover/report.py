"""A crossover search's trace in the report (search.json): each step, why it was taken and
what it measured, why it stopped, the bracket, and what a twin asked first predicted."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from grid.questions.crossover.steps import describe
from grid.questions.steps import step_lines, unfinished


def bracket_text(bracket: list) -> str:
    low, high = bracket
    if low is None and high is None:
        return "not yet"
    if high is None:
        return f"pays up to c={low}"
    if low is None:
        return f"stops paying at c={high}"
    return f"between c={low} and c={high}"


def trace_lines(trace: dict, points: Callable[[Sequence[int]], str] = describe) -> list[str]:
    """One line per step (its points in the words of `points`) and one for the outcome."""
    res = trace["result"]
    lines = [f"search: {trace.get('kind', 'crossover')} of {trace['variant']} vs "
             f"{trace['baseline']} on {trace['workload']}, {res['cells']} of "
             f"{res['max_cells']} cells (lattice {res['lattice'][0]}..{res['lattice'][-1]})"]
    lines += step_lines(trace["steps"], points)
    stop = res.get("stop")
    if stop:
        lines.append(f"  stopped: {stop} ({res['stop_meaning']}); crossover "
                     f"{bracket_text(res['bracket'])}")
    else:
        lines.append(unfinished(res))
    if res.get("prior"):
        lines += prior_lines(res["prior"])
    return lines


def answer_sentence(trace: dict) -> str | None:
    """The run's first sentence: where the variant stops paying, as the search bracketed it."""
    res = trace["result"]
    if not res.get("stop"):
        return None
    return (f"{trace['variant']} vs {trace['baseline']} on {trace['workload']}: the crossover "
            f"search ({res['cells']} cells) finds speculation "
            f"{bracket_text(res['bracket'])}")


def prior_lines(prior: dict) -> list[str]:
    """What the twin asked first predicted, against what the search then measured."""
    low, high = prior["predicted_bracket"]
    said = (f"the crossover {bracket_text([low, high])}" if low is not None and high is not None
            else f"that speculation {bracket_text([low, high])}")
    head = f"  prior: {prior['source']} predicted {said}; the search measured there first"
    rows = [f"c={r['load']} predicted {r['predicted']:+.1%}, measured {r['measured']:+.1%} "
            f"[{r['interval'][0]:+.1%}, {r['interval'][1]:+.1%}]"
            + ("" if r["inside"] else " (outside)") for r in prior["levels"]]
    if not rows:
        return [head]
    error = prior["mean_abs_error"]
    return [head, f"    at the measured levels: {'; '.join(rows)}; mean |error| "
                  f"{100 * error:.1f} points of speedup"]
