"""A threshold search's answer in the report (search.json): the value it confirmed, which
replaces the crossover rule's recommendation for its variant and workload."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from grid.questions.crossover import report as crossover
from grid.questions.threshold.steps import describe_point


def _value_text(value: int | None) -> str:
    return ("no threshold needed within the searched range" if value is None else
            "keep speculation off (speculative_disable_above_batch=0)" if value == 0 else
            f"set speculative_disable_above_batch={value}")


def searched_recommendations(recs: list[dict], trace: dict) -> list[dict]:
    """A threshold search's confirmed value replaces the crossover rule's recommendation for
    its variant and workload (the rule's value kept as `crossover_rule`): it was measured on
    the engine's own threshold, where the rule only reads the lattice's levels."""
    res = trace["result"]
    if not res.get("threshold_stop"):
        return recs
    value = res.get("threshold")
    signs: dict[str, str] = next((s.get("signs") for s in reversed(trace["steps"])
                                  if s.get("phase") == "confirm" and s.get("signs")), {})
    measured = "; ".join(
        f"{pair.replace('->', ' vs ')}: {'higher' if sign.startswith('+') else 'lower'} wins"
        + ("" if sign in ("+", "-") else " (point estimate)") for pair, sign in signs.items())
    key = (trace["variant"], trace["workload"])
    old = next((r for r in recs if (r["variant"], r["workload"]) == key), None)
    rule = None if old is None else old.get("speculative_disable_above_batch")
    statement = (f"{_value_text(value)}: the threshold search's choice ({res['threshold_stop']}"
                 + (f"; {measured}" if measured else "") + ")"
                 + (f"; the crossover rule alone says {rule}" if rule != value else ""))
    new = {**(old or {"variant": key[0], "workload": key[1]}),
           "speculative_disable_above_batch": value, "statement": statement,
           "source": "threshold search", "crossover_rule": rule}
    return [new if r is old else r for r in recs] + ([] if old is not None else [new])


def trace_lines(trace: dict, points: Callable[[Sequence[int]], str] = describe_point
                ) -> list[str]:
    """The crossover search's lines, then the confirmed threshold once it stopped."""
    res = trace["result"]
    lines = crossover.trace_lines(trace, points)
    if not res.get("threshold_stop"):
        return lines
    value = res.get("threshold")
    answer = ("no threshold needed within the range" if value is None else
              "keep speculation off (0)" if value == 0 else
              f"set speculative_disable_above_batch={value}")
    return [*lines, f"  threshold: {answer} ({res['threshold_stop']}: "
            f"{res['threshold_stop_meaning']})"]


def answer_sentence(trace: dict) -> str | None:
    """The run's first sentence: the confirmed value and why the confirmation stopped."""
    res = trace["result"]
    if not res.get("threshold_stop"):
        return None
    return (f"{trace['variant']} on {trace['workload']}: {_value_text(res.get('threshold'))} "
            f"(the threshold search's choice after {res['cells']} cells: "
            f"{res['threshold_stop']})")
