"""The conversation part of a run's report (workload.kind=conversations, docs/agentic.md): per
variant and conversation concurrency, by context-length bin, the rounds' accept length, TTFT
p50, per-stream decode speed and round speed; the prefix-cache hit rate; each speculative
variant's speedup over the baseline per bin, and where it stops paying for this traffic.

Definitions (as specgrid_metrics/requests.py states them for requests): accept length = Σ output
tokens / Σ spec_verify_ct over completed rounds; decode speed = Σ output tokens / Σ (E2E -
TTFT); round speed = Σ output tokens / Σ E2E (what an agent waiting on each reply sees:
prefill of the new context and decode together); cache hit rate = Σ cached_tokens /
Σ context_tokens; speedup = a variant's round speed / the baseline's at the same concurrency and
bin. Only completed rounds count. Pure pandas."""

from __future__ import annotations

from typing import Any

import pandas as pd

from grid.analysis.jsonsafe import clean
from grid.analysis.setups import is_baseline, split
from grid.report.markup import dash

BIN_EDGES = (0, 4096, 8192, 16384)
"""Lower edges of the context-length bins (tokens): 0-4k, 4-8k, 8-16k, 16k+."""


def context_bin(tokens: float) -> str:
    """The bin label of a context of `tokens` tokens."""
    lows = [edge for edge in BIN_EDGES if tokens >= edge]
    lo = lows[-1] if lows else 0
    i = BIN_EDGES.index(lo)
    if i + 1 < len(BIN_EDGES):
        return f"{lo // 1024}-{BIN_EDGES[i + 1] // 1024}k"
    return f"{lo // 1024}k+"


def bin_order(label: str) -> int:
    """Sort key of a bin label (its lower edge in k tokens)."""
    return int(label.split("-")[0].rstrip("k+"))


def turn_table(turns: pd.DataFrame) -> pd.DataFrame:
    """One row per (variant, concurrency, context bin) of the completed rounds: rounds,
    accept_length, ttft_p50_s, stream_tok_s (decode), round_tok_s, cache_hit_rate."""
    ok = turns[(turns.status == "ok") & turns.context_tokens.notna()].copy()
    if ok.empty:
        return pd.DataFrame(columns=["variant", "concurrency", "bin", "rounds", "accept_length",
                                     "ttft_p50_s", "stream_tok_s", "round_tok_s",
                                     "cache_hit_rate"])
    ok["bin"] = ok.context_tokens.map(context_bin)
    ok["decode_s"] = ok.e2e_s - ok.ttft_s
    rows = []
    for (variant, conc, label), g in ok.groupby(["variant", "concurrency", "bin"],
                                                observed=True, dropna=False):
        verify = g.spec_verify_ct.fillna(0)
        spec = g[verify > 0]
        decode, e2e = g.decode_s.sum(), g.e2e_s.sum()
        cached = g[g.cached_tokens.notna()]
        rows.append({
            "variant": variant, "concurrency": conc, "bin": label, "rounds": len(g),
            "accept_length": (spec.output_tokens.sum() / spec.spec_verify_ct.sum()
                              if len(spec) else None),
            "ttft_p50_s": float(g.ttft_s.median()),
            "stream_tok_s": float(g.output_tokens.sum() / decode) if decode > 0 else None,
            "round_tok_s": float(g.output_tokens.sum() / e2e) if e2e > 0 else None,
            "cache_hit_rate": (float(cached.cached_tokens.sum() / cached.context_tokens.sum())
                               if len(cached) else None),
        })
    table = pd.DataFrame(rows)
    table["_order"] = table.bin.map(bin_order)
    return (table.sort_values(["variant", "concurrency", "_order"]).drop(columns="_order")
            .reset_index(drop=True))


def with_speedup(table: pd.DataFrame, baseline: str = "baseline") -> pd.DataFrame:
    """`table` plus `speedup`: round_tok_s / the baseline's at the same concurrency and bin
    (None where the baseline has no rounds there)."""
    base = {(split(r["variant"])[0], r["concurrency"], r["bin"]): r["round_tok_s"]
            for r in table.to_dict("records") if is_baseline(r["variant"], baseline)}
    out = table.copy()
    speedups: list[float | None] = []
    for r in table.to_dict("records"):
        ref = base.get((split(r["variant"])[0], r["concurrency"], r["bin"]))
        mine = r["round_tok_s"]
        speedups.append(None if ref is None or mine is None or pd.isna(ref) or pd.isna(mine)
                        or not ref else float(mine / ref))
    out["speedup"] = speedups
    return out


def crossover_points(table: pd.DataFrame, baseline: str = "baseline") -> list[dict[str, Any]]:
    """Per speculative variant and concurrency (of a `with_speedup` table): `stops_from`, the
    first context bin from which its round speed is below the baseline's (speculation stops
    paying; None when it pays in every bin), the speedup there and the range over bins."""
    out = []
    spec = table[~table.variant.map(lambda v: is_baseline(v, baseline)).astype(bool)
                 & table.speedup.notna()]
    for (variant, conc), g in spec.groupby(["variant", "concurrency"], observed=True):
        losing = g[g.speedup < 1.0]
        first = losing.iloc[0] if len(losing) else None
        out.append({"variant": str(variant), "concurrency": clean(conc),
                    "stops_from": None if first is None else str(first.bin),
                    "speedup_there": None if first is None else float(first.speedup),
                    "speedup_min": float(g.speedup.min()),
                    "speedup_max": float(g.speedup.max())})
    return out


def crossover(table: pd.DataFrame, baseline: str = "baseline") -> list[str]:
    """Per speculative variant and concurrency: the first context bin from which its round
    speed is below the baseline's (speculation stops paying), or that it pays in every bin."""
    lines = []
    for p in crossover_points(table, baseline):
        if p["stops_from"] is None:
            lines.append(f"{p['variant']} c={p['concurrency']}: faster than {baseline} in every "
                         f"context bin (speedup {p['speedup_min']:.2f}-{p['speedup_max']:.2f}x)")
        else:
            lines.append(f"{p['variant']} c={p['concurrency']}: stops paying from context "
                         f"{p['stops_from']} (speedup {p['speedup_there']:.2f}x)")
    return lines


def conversation_cells(cells: pd.DataFrame, turns: pd.DataFrame, baseline: str = "baseline"
                       ) -> pd.DataFrame:
    """The rows of `cells` (the analysed cells table, or any frame with cell_id, variant,
    concurrency, output_tok_s) that have turns, sorted by variant and concurrency, with
    `conversations` and `rounds` (sent) from the turns and `vs_baseline`: output_tok_s / the
    baseline's at the same concurrency (None without one)."""
    mine = cells[cells.cell_id.isin(set(turns.cell_id))].sort_values(["variant", "concurrency"])
    sent = turns[turns.status.isin(("ok", "error"))]
    convs = sent.groupby("cell_id").conversation_id.nunique() if "conversation_id" in sent \
        else pd.Series(dtype=float)
    rounds = sent.groupby("cell_id").size()
    base = {(split(r["variant"])[0], r["concurrency"]): r["output_tok_s"]
            for r in mine.to_dict("records") if is_baseline(r["variant"], baseline)}
    ratios = []
    for r in mine.to_dict("records"):
        ref = base.get((split(r["variant"])[0], r["concurrency"]))
        ratios.append(float(r["output_tok_s"] / ref) if ref and not pd.isna(ref)
                      and not pd.isna(r["output_tok_s"]) else None)
    return mine.assign(conversations=mine.cell_id.map(convs), rounds=mine.cell_id.map(rounds),
                       vs_baseline=pd.Series(ratios, index=mine.index, dtype=float)
                       ).reset_index(drop=True)


def cell_lines(cells: pd.DataFrame, turns: pd.DataFrame, baseline: str = "baseline"
               ) -> list[str]:
    """Per conversation cell (variant x conversations in flight): throughput (output tok/s of
    the completed rounds, as the cells table has it), its ratio to the baseline's at the same
    concurrency, TTFT p50, accept length and prefix-cache hit rate."""
    lines = [f"  {'variant':<12} {'c':>3} {'tok/s':>8} {'vs base':>7} {'TTFT p50':>9} "
             f"{'accept':>6} {'cache hit':>9}"]
    for r in conversation_cells(cells, turns, baseline).to_dict("records"):
        hit = None if pd.isna(r["cache_hit_rate"]) else 100 * r["cache_hit_rate"]
        lines.append(f"  {r['variant']:<12} {r['concurrency']:>3} "
                     f"{dash(r['output_tok_s'], '{:.1f}'):>8} "
                     f"{dash(r['vs_baseline'], '{:.2f}x'):>7} "
                     f"{dash(_ms(r['ttft_p50_s']), '{:.1f}ms'):>9} "
                     f"{dash(r['accept_length'], '{:.2f}'):>6} {dash(hit, '{:.0f}%'):>9}")
    return lines


def cache_hit_by_variant(turns: pd.DataFrame) -> dict[str, tuple[float | None, int]]:
    """Variant -> (prefix-cache hit rate over its completed rounds that report one, rounds)."""
    out = {}
    ok = turns[turns.status == "ok"]
    for variant, g in ok.groupby("variant", observed=True):
        cached = g[g.cached_tokens.notna()]
        rate = (float(cached.cached_tokens.sum() / cached.context_tokens.sum())
                if len(cached) and cached.context_tokens.sum() else None)
        out[str(variant)] = (rate, len(g))
    return out


def findings(turns: pd.DataFrame, baseline: str = "baseline") -> dict[str, Any]:
    """The conversation findings for decision.json: the by-context table (with speedups) and
    where each speculative variant stops paying; empty without turns."""
    if turns.empty:
        return {}
    table = with_speedup(turn_table(turns), baseline)
    return {"context_bins_tokens": list(BIN_EDGES),
            "prefix_cache_hit_rate": {v: rate for v, (rate, _) in
                                      cache_hit_by_variant(turns).items()},
            "by_context": [{k: clean(v) for k, v in r.items()}
                           for r in table.to_dict("records")],
            "stops_paying": crossover_points(table, baseline)}


def _ms(seconds: Any) -> float | None:
    return None if seconds is None or pd.isna(seconds) else 1000 * float(seconds)


def agentic_summary(turns: pd.DataFrame, cells: pd.DataFrame | None = None,
                    baseline: str = "baseline") -> list[str]:
    """The report's conversation section as text lines (empty without turns): per cell (when
    `cells`, the analysed cells table, is given), then by context length."""
    if turns.empty:
        return []
    table = with_speedup(turn_table(turns), baseline)
    lines = ["conversations (turns dataset): concurrency c = conversations in flight"]
    for variant, (rate, n) in cache_hit_by_variant(turns).items():
        lines.append(f"  {variant}: prefix-cache hit rate "
                     f"{'-' if rate is None else f'{rate:.0%}'} over {n} rounds")
    if cells is not None and not cells.empty:
        lines += cell_lines(cells, turns, baseline)
    lines.append("by context length (decode = per-stream decode tok/s; round = output tokens / "
                 f"round E2E; speedup = round tok/s vs {baseline}):")
    lines.append(f"  {'variant':<12} {'c':>3} {'context':>8} {'rounds':>6} {'accept':>6} "
                 f"{'TTFT p50':>9} {'decode':>7} {'round':>7} {'speedup':>7}")
    for row in table.to_dict("records"):
        lines.append(f"  {row['variant']:<12} {row['concurrency']:>3} {row['bin']:>8} "
                     f"{row['rounds']:>6} {dash(row['accept_length'], '{:.2f}'):>6} "
                     f"{row['ttft_p50_s'] * 1000:>7.1f}ms "
                     f"{dash(row['stream_tok_s'], '{:.1f}'):>7} "
                     f"{dash(row['round_tok_s'], '{:.1f}'):>7} "
                     f"{dash(row['speedup'], '{:.2f}x'):>7}")
    lines += [f"  {line}" for line in crossover(table, baseline)]
    return lines
