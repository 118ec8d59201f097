"""Throughput of the workloads package on a generated 100k-row ShareGPT training file: the
streaming loader, the seeded stratified sampler (loader included), the alignment check (the
reference built from all rows, then 1,000 prompts compared), and the simulated drafter's
per-prompt cost (what each request pays inside the simulator, uncached and cached).

Each phase runs in its own process so its peak RSS (ru_maxrss) is its own.

    python bench/workloads_throughput.py                 # 100k rows, prints the table
    python bench/workloads_throughput.py --rows 20000 --json /tmp/wl.json

The file is generated into a temporary folder (deleted afterwards): rows of nine data-set
families (the sources of a coding/agentic drafter), 40-260 words each drawn Zipf-like from
per-domain vocabularies (keywords plus 5,000 synthetic words), a third of them multi-turn with a
system turn, about 1 KB per row."""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VOCAB = {
    "coding": "def return class import list dict function python pytest refactor exception async "
              "await parser regex module compile variable loop index cache handler endpoint json "
              "schema struct pointer rust typescript query sql join commit branch".split(),
    "agentic": "tool call arguments observation action plan step search read_file run_tests "
               "edit repository issue traceback patch agent browser click result status retry "
               "workspace terminal shell command subtask schema function".split(),
    "math": "prove lemma theorem integer prime equation integral derivative matrix polynomial "
            "probability sum product root bound limit ratio sequence series inequality".split(),
    "chat": "recipe travel weekend advice friend email letter story movie music hobby garden "
            "plan budget fitness sleep gift birthday holiday weather coffee".split(),
}
SOURCES = {"magicoder": "coding", "opencodeinstruct": "coding", "deepseek-kimi": "coding",
           "glaive": "agentic", "sweagent": "agentic", "openthoughts": "math",
           "mixturethoughts": "math", "ultrachat": "chat", "sharegpt": "chat"}
COMMON = "the a of to and in is for with on that this it as be by".split()


def _vocabulary(domain: str, size: int = 5000) -> tuple[list[str], list[float]]:
    """A domain's keywords plus `size` synthetic words, Zipf-weighted (rank r has weight 1/r),
    as in natural text: a few frequent words and a long tail (a uniform draw from a few dozen
    words would make every row share terms with every other, which no real corpus does)."""
    words = VOCAB[domain] + [f"{domain[:3]}{i}" for i in range(size)]
    return words, [1.0 / (rank + 1) for rank in range(len(words))]


def generate(path: Path, rows: int, seed: int = 0) -> None:
    rng = random.Random(seed)
    names = list(SOURCES)
    vocab = {d: _vocabulary(d) for d in VOCAB}
    with path.open("w") as fh:
        for _ in range(rows):
            source = rng.choice(names)
            words, weights = vocab[SOURCES[source]]
            text = " ".join(rng.choices(COMMON, k=10) + rng.choices(
                words, weights=weights, k=rng.randint(40, 260)))
            turns = [{"from": "human", "value": text}, {"from": "gpt", "value": "ok " * 20}]
            if rng.random() < 1 / 3:
                turns = [{"from": "system", "value": "You are a helpful assistant."}, *turns,
                         {"from": "human", "value": "and then?"}, {"from": "gpt", "value": "."}]
            fh.write(json.dumps({"source": source, "conversations": turns}) + "\n")


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def phase(name: str, path: str) -> dict[str, float]:
    from workloads.loaders import LoadStats, iter_rows

    if name == "load":
        stats = LoadStats()
        t = time.perf_counter()
        n = sum(1 for _ in iter_rows(path, stats))
        secs = time.perf_counter() - t
        return {"rows": n, "seconds": secs, "rows_per_s": n / secs, "peak_rss_mb": _peak_mb()}
    if name == "sample":
        from workloads.sampler import stratified_sample

        stats = LoadStats()
        t = time.perf_counter()
        sample = stratified_sample(iter_rows(path, stats), 256, seed=0,
                                   mix={"coding": 0.6, "agentic": 0.4})
        secs = time.perf_counter() - t
        return {"rows": stats.rows, "sampled": len(sample.rows), "seconds": secs,
                "rows_per_s": stats.rows / secs, "peak_rss_mb": _peak_mb()}
    if name == "align":
        from workloads.alignment import ReferenceIndex
        from workloads.reference import drafter_reference

        t = time.perf_counter()
        ref = drafter_reference(path, None)
        loaded = time.perf_counter()
        index = ReferenceIndex.from_rows(ref.rows, ref.description)
        built = time.perf_counter()
        prompts = [r.text + " variant" for r in ref.rows[:1000]]
        result = index.align(prompts)
        done = time.perf_counter()
        return {"rows": ref.stats.rows, "reference_rows": len(ref.rows), "load_s": loaded - t,
                "index_s": built - loaded, "align_1000_s": done - built, "seconds": done - t,
                "rows_per_s": ref.stats.rows / (done - t), "alignment": result.value,
                "peak_rss_mb": _peak_mb()}
    if name == "drafter":
        from engines.sim.drafter import SimDrafter
        from engines.sim.profile import load_profile

        t = time.perf_counter()
        drafter = SimDrafter(load_profile().acceptance, train_data=path)
        start_s = time.perf_counter() - t
        prompts = [" ".join(random.Random(i).choices(VOCAB["coding"], k=80)) for i in range(500)]
        t = time.perf_counter()
        for p in prompts:
            drafter.chain(p)
        uncached = (time.perf_counter() - t) / len(prompts)
        t = time.perf_counter()
        for _ in range(4):
            for p in prompts:
                drafter.chain(p)
        cached = (time.perf_counter() - t) / (4 * len(prompts))
        return {"start_s": start_s, "uncached_us": uncached * 1e6, "cached_us": cached * 1e6,
                "peak_rss_mb": _peak_mb()}
    raise SystemExit(f"unknown phase {name}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--phase", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--file", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.phase:
        print(json.dumps(phase(args.phase, args.file)))
        return 0
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "train_sharegpt.jsonl"
        t = time.perf_counter()
        generate(path, args.rows)
        size_mb = path.stat().st_size / 2**20
        print(f"generated {args.rows} ShareGPT rows ({size_mb:.0f} MB) in "
              f"{time.perf_counter() - t:.1f} s")
        for name in ("load", "sample", "align", "drafter"):
            out = subprocess.run([sys.executable, __file__, "--phase", name, "--file", str(path)],
                                 capture_output=True, text=True, check=True)
            results[name] = json.loads(out.stdout.strip().splitlines()[-1])
            print(name, json.dumps({k: round(v, 3) for k, v in results[name].items()}))
    r = results
    print("\n| phase | rows | seconds | rows/s | peak RSS MB |")
    print("|---|---|---|---|---|")
    for name in ("load", "sample", "align"):
        print(f"| {name} | {int(r[name]['rows']):,} | {r[name]['seconds']:.1f} | "
              f"{r[name]['rows_per_s']:,.0f} | {r[name]['peak_rss_mb']:.0f} |")
    print(f"\nalign: read + deterministic subsample to {int(r['align']['reference_rows']):,} rows "
          f"{r['align']['load_s']:.1f} s, index {r['align']['index_s']:.1f} s, 1000 prompts "
          f"{r['align']['align_1000_s']:.2f} s")
    print(f"simulated drafter: start {r['drafter']['start_s']:.1f} s, per prompt "
          f"{r['drafter']['uncached_us']:.0f} us uncached, {r['drafter']['cached_us']:.1f} us "
          f"cached, peak RSS {r['drafter']['peak_rss_mb']:.0f} MB")
    if args.json:
        args.json.write_text(json.dumps({"rows": args.rows, **results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
