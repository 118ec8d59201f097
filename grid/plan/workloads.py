"""The grid side of workloads: a workload config turned into the prompts a cell sends, checked
against the drafter of each speculative cell, and recorded with the run.

A workload is either a prompt file (JSON lines: prompt_id, domain, source, text; relative names
are in workloads/prompts/) filtered by domain, or -- with `train_data` -- a seeded stratified
sample of a drafter's training data (workloads/sampler.py), optionally from a holdout split.
`input_tokens` shapes prompt lengths. Everything that can be wrong with the input raises
ValueError with one line (the entry point turns it into `specgrid: error: ...`, exit 2) before
Ray or any server starts. Pure: no Ray, no sockets."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import engines
from actors.loadgen.spec import Prompt
from workloads import PROMPTS_DIR
from workloads.alignment import ALIGNED_THRESHOLD, Alignment, ReferenceIndex
from workloads.loaders import LoadStats, iter_rows, read_prompt_file
from workloads.records import TextRow, row_key
from workloads.reference import Reference, drafter_reference
from workloads.sampler import normalize_mix, stratified_sample

CHARS_PER_TOKEN = 4
"""Input-length shaping estimates tokens as characters / 4 (the server's tokenizer is not
available to the planner; the simulator uses the same rule)."""


@dataclass
class WorkloadSet:
    """A workload's prompts and where each came from."""

    name: str
    prompts: tuple[Prompt, ...]
    rows: tuple[TextRow, ...]
    """Parallel to prompts: source, file and line of each prompt."""
    digest: str
    """Content digest of the prompts (part of every cell id)."""
    description: str
    notes: list[str] = field(default_factory=list)
    """Malformed rows skipped, strata short of rows: printed as plan warnings."""

    @functools.cached_property
    def sources(self) -> dict[str, str | None]:
        """prompt_id -> source label."""
        return {p.prompt_id: r.source for p, r in zip(self.prompts, self.rows, strict=True)}


@dataclass(frozen=True)
class CellAlignment:
    """A speculative cell's workload measured against its drafter's training data or mix."""

    alignment: float
    ok: bool
    reference: str
    similarity: Mapping[str, float]
    """prompt_id -> similarity to the drafter's training data (per-request column)."""


@dataclass
class WorkloadPlan:
    """What the plan decided about workloads: the prompt sets and each speculative cell's
    alignment with its drafter."""

    sets: dict[str, WorkloadSet] = field(default_factory=dict)
    """Workload name -> its prompts."""
    alignments: dict[str, CellAlignment] = field(default_factory=dict)
    """Cell id -> alignment (speculative cells whose drafter is described)."""
    notes: list[str] = field(default_factory=list)
    conversations: dict[str, Any] = field(default_factory=dict)
    """Workload name -> its plan.conversations.ConversationSet (workload.kind=conversations)."""

    @property
    def prompts(self) -> dict[str, tuple[Prompt, ...]]:
        return {name: ws.prompts for name, ws in self.sets.items()}

    def sources(self, workload: str) -> dict[str, str | None]:
        ws = self.sets.get(workload)
        return ws.sources if ws else {}

def prompts_path(name: str) -> Path:
    path = Path(name)
    return path if path.is_absolute() else PROMPTS_DIR / path


def _holdout(workload: Mapping[str, Any]) -> tuple[Path | None, float | None]:
    value = workload.get("holdout")
    if value in (None, ""):
        return None, None
    try:
        fraction = float(value)
    except (TypeError, ValueError):
        path = Path(str(value))
        if not path.exists():
            raise ValueError(f"workload {workload['name']!r}: holdout {path} not found") from None
        return path, None
    if not 0 < fraction < 1:
        raise ValueError(f"workload {workload['name']!r}: holdout fraction must be within (0, 1), "
                         f"got {value}")
    return None, fraction


def _shape(rows: Iterable[TextRow], bounds: list[int] | None, mode: str) -> Iterator[TextRow]:
    """Rows within [min, max] estimated tokens (`filter`), or cut/padded into it (`fit`)."""
    if not bounds:
        yield from rows
        return
    lo, hi = int(bounds[0]), int(bounds[1])
    for row in rows:
        tokens = -(-len(row.text) // CHARS_PER_TOKEN)
        if mode == "filter":
            if lo <= tokens <= hi:
                yield row
            continue
        text = row.text
        while len(text) < lo * CHARS_PER_TOKEN:
            text = f"{text}\n\n{row.text}"
        text = text[: hi * CHARS_PER_TOKEN]
        yield TextRow(text, row.source, row.domain, row.file, row.line, row.turns, row.prompt_id)


def _check_bounds(workload: Mapping[str, Any]) -> None:
    bounds = workload.get("input_tokens")
    if bounds is None:
        return
    if len(bounds) != 2 or not 1 <= int(bounds[0]) <= int(bounds[1]):
        raise ValueError(f"workload {workload['name']!r}: input_tokens must be [min, max] with "
                         f"1 <= min <= max, got {list(bounds)}")


PROMPT_SET_FIELDS = ("name", "prompts", "domains", "input_tokens", "input_shaping", "train_data",
                     "holdout", "num_prompts", "sample_seed", "mix")
"""The workload fields that decide which prompts a workload sends (not how long the answers are)."""


def prompt_set_key(workload: Mapping[str, Any]) -> str:
    """Equal for two workload configs that load the same prompt set."""
    return json.dumps({k: workload.get(k) for k in PROMPT_SET_FIELDS}, sort_keys=True, default=str)


def load_workload(workload: Mapping[str, Any]) -> WorkloadSet:
    """The workload's prompts: its prompt file (filtered by domains) or a sample of its
    training data; shaped by input_tokens. ValueError (one line) on bad input."""
    name = str(workload["name"])
    _check_bounds(workload)
    bounds, mode = workload.get("input_tokens"), str(workload.get("input_shaping", "filter"))
    stats = LoadStats()
    notes: list[str] = []
    if workload.get("train_data"):
        rows, description = _sample(workload, bounds, mode, stats, notes)
    else:
        path = prompts_path(str(workload["prompts"]))
        if not path.is_file():
            raise ValueError(f"workload {name!r}: prompt file {path} not found")
        found, stats = read_prompt_file(path)
        domains = list(workload.get("domains") or [])
        kept = [r for r in found if not domains or r.domain in domains]
        rows = list(_shape(kept, bounds, mode))
        description = f"{path.name} ({len(rows)} prompts)"
        if not rows:
            raise ValueError(f"workload {name!r} has no prompts after filtering (domains="
                             f"{domains}, input_tokens={bounds})")
    if stats.malformed:
        notes.append(f"workload {name}: {stats.describe()}")
    prompts = tuple(Prompt(_prompt_id(r), r.text, r.domain or "unknown") for r in rows)
    digest = hashlib.sha256(json.dumps(
        [[p.prompt_id, p.domain, p.text] for p in prompts]).encode()).hexdigest()[:16]
    return WorkloadSet(name, prompts, tuple(rows), digest, description, notes)


def _prompt_id(row: TextRow) -> str:
    return row.prompt_id or f"{row.source or row.domain or 'row'}-{row.key[:10]}"


def _sample(workload: Mapping[str, Any], bounds: list[int] | None, mode: str, stats: LoadStats,
            notes: list[str]) -> tuple[list[TextRow], str]:
    name, data = str(workload["name"]), str(workload["train_data"])
    holdout_file, fraction = _holdout(workload)
    exclude: frozenset[str] = frozenset()
    source = iter_rows(data, stats)
    if holdout_file is not None:
        exclude = frozenset(r.key for r in iter_rows(data, LoadStats()))
        source = iter_rows(holdout_file, stats)
    n = int(workload.get("num_prompts") or 0)
    sample = stratified_sample(_shape(source, bounds, mode), n,
                               seed=int(workload.get("sample_seed") or 0),
                               mix=dict(workload.get("mix") or {}) or None,
                               holdout_fraction=fraction, exclude_keys=exclude)
    notes.extend(f"workload {name}: {note}" for note in sample.notes)
    if sample.excluded_training_rows:
        notes.append(f"workload {name}: {sample.excluded_training_rows} holdout row(s) also in "
                     "the training data were not drawn")
    split = (f" from holdout {holdout_file}" if holdout_file else
             f" from its {fraction:g} holdout split" if fraction else "")
    mix = ", ".join(f"{k} {v:.2f}" for k, v in sorted(sample.mix.items()))
    return sample.rows, (f"{len(sample.rows)} prompts sampled from {data}{split} by "
                         f"{sample.by} ({mix}; seed {workload.get('sample_seed') or 0})")


# --- the drafter -------------------------------------------------------------------------------
def drafter_inputs(config: Mapping[str, Any]) -> tuple[str | None, dict[str, float] | None,
                                                       float | None]:
    """(training data, training mix, holdout fraction of that data) a cell's drafter is
    described by: model.drafter.train_data, else the workload's train_data (the workload says
    its prompts come from the drafter's data), else model.drafter.train_mix."""
    drafter = config["model"].get("drafter") or {}
    workload = config["workload"]
    if drafter.get("train_data"):
        return str(drafter["train_data"]), None, None
    if workload.get("train_data"):
        _, fraction = _holdout(workload)
        return str(workload["train_data"]), None, fraction
    mix = dict(drafter.get("train_mix") or {})
    return None, (mix or None), None


def is_speculative(config: Mapping[str, Any]) -> bool:
    return bool(config["variant"]["args"].get("speculative_algorithm"))


class AlignmentCache:
    """References built once per drafter and alignments once per (workload, drafter)."""

    def __init__(self) -> None:
        self._indexes: dict[str, tuple[ReferenceIndex, Reference]] = {}
        self._alignments: dict[tuple[str, str], CellAlignment] = {}

    def for_cell(self, config: Mapping[str, Any], workload: WorkloadSet) -> CellAlignment | None:
        """The cell's alignment, or None when it is not speculative or its drafter is unknown."""
        if not is_speculative(config):
            return None
        data, mix, fraction = drafter_inputs(config)
        if data is None and mix is None:
            return None
        key = json.dumps([data, mix, fraction], sort_keys=True)
        if (workload.digest, key) not in self._alignments:
            if key not in self._indexes:
                ref = drafter_reference(data, mix, holdout_fraction=fraction)
                self._indexes[key] = (ReferenceIndex.from_rows(ref.rows, ref.description), ref)
            index, _ = self._indexes[key]
            result: Alignment = index.align([p.text for p in workload.prompts])
            self._alignments[(workload.digest, key)] = CellAlignment(
                alignment=round(result.value, 4), ok=result.ok, reference=result.reference,
                similarity={p.prompt_id: round(s, 4) for p, s in
                            zip(workload.prompts, result.similarity, strict=True)})
        return self._alignments[(workload.digest, key)]

    def reference_notes(self) -> list[str]:
        """Malformed rows met while reading drafters' training data."""
        return [f"drafter {ref.description}: {ref.stats.describe()}"
                for _, ref in self._indexes.values() if ref.stats.malformed]


def check_drafter(config: Mapping[str, Any]) -> None:
    """One-line ValueError for a drafter or workload description that cannot be used."""
    drafter = config["model"].get("drafter") or {}
    for where, mix in (("model.drafter.train_mix", drafter.get("train_mix")),
                       ("workload.mix", config["workload"].get("mix"))):
        if mix is not None and not isinstance(mix, Mapping):
            raise ValueError(f"{where} must be a mapping name -> weight, got {mix!r}")
    if drafter.get("train_mix"):
        normalize_mix(drafter["train_mix"], "model.drafter.train_mix")
    if drafter.get("train_data") and not Path(str(drafter["train_data"])).expanduser().exists():
        raise ValueError(f"model.drafter.train_data {drafter['train_data']} not found")
    workload = config["workload"]
    if not workload.get("train_data"):
        for key in ("mix", "holdout"):
            if workload.get(key):
                raise ValueError(f"workload {workload['name']!r}: workload.{key} needs "
                                 "workload.train_data (the data to sample from)")
    elif workload.get("mix"):
        normalize_mix(workload["mix"], "workload.mix")
    if workload.get("train_data") and int(workload.get("num_prompts") or 0) < 1:
        raise ValueError(f"workload {workload['name']!r}: num_prompts must be at least 1")


def drafter_options(config: Mapping[str, Any]) -> dict[str, Any]:
    """The engine options that make a cell's engine follow its drafter (`Modeller.
    drafter_options`: the simulator models acceptance from the training data or mix), so the
    modelled acceptance follows the same drafter the plan checks against; none for a real
    engine."""
    data, mix, _ = drafter_inputs(config)
    model = engines.modeller(config["engine"]["name"])
    if model is None:
        return {}
    return model.drafter_options(str(Path(data).expanduser().resolve()) if data else None, mix)


# --- the plan's view ----------------------------------------------------------------------------
def alignment_lines(cells: Iterable[Any], plan: WorkloadPlan) -> list[str]:
    """One line per workload x speculative variant: the alignment figure and its reference."""
    seen: dict[tuple[str, str, str], CellAlignment] = {}
    for cell in cells:
        found = plan.alignments.get(cell.cell_id)
        if found is not None:
            seen.setdefault((cell.workload_name, cell.variant, found.reference), found)
    lines = []
    for (workload, variant, reference), a in seen.items():
        verdict = "on the drafter's distribution" if a.ok else "OFF the drafter's distribution"
        lines.append(f"alignment {workload} x {variant}: {a.alignment:.2f} ({verdict}; threshold "
                     f"{ALIGNED_THRESHOLD}; against {reference})")
    return lines


def alignment_warnings(cells: Iterable[Any], plan: WorkloadPlan) -> list[str]:
    """A warning per off-distribution workload x speculative variant."""
    out = []
    for line in alignment_lines(cells, plan):
        if "OFF the drafter" in line:
            workload_variant = line.split(":", 1)[0].removeprefix("alignment ")
            out.append(f"{workload_variant}: speculative decoding measured OFF the drafter's "
                       f"training distribution ({line.split(': ', 1)[1].split(' (')[0]}); it "
                       "measures the mismatch, not the method (docs/workloads.md)")
    return out


# --- recorded with the run ---------------------------------------------------------------------
def workload_records(sets: Mapping[str, WorkloadSet]) -> dict[str, list[dict[str, Any]]]:
    """What a run records of its prompts (written by grid/store/record.py
    `record_workloads`): file name `<name>-<digest>.jsonl` -> its rows, one per prompt the
    run sends, with its source, domain and the file and line it came from."""
    return {f"{ws.name}-{ws.digest}.jsonl": [
        {"prompt_id": p.prompt_id, "domain": p.domain, "source": r.source, "file": r.file,
         "line": r.line, "turns": r.turns, "row_key": row_key(p.text), "text": p.text}
        for p, r in zip(ws.prompts, ws.rows, strict=True)] for ws in sets.values()}


def cell_columns(alignment: CellAlignment | None) -> dict[str, Any]:
    """`alignment`, `alignment_ok`, `alignment_reference` of a cell row (null: not speculative
    or no drafter described)."""
    if alignment is None:
        return {}
    return {"alignment": alignment.alignment, "alignment_ok": alignment.ok,
            "alignment_reference": alignment.reference}


def request_columns(sources: Mapping[str, str | None], alignment: CellAlignment | None,
                    prompt_id: str) -> dict[str, Any]:
    """`source` and `nearest_train_similarity` of a request row."""
    out: dict[str, Any] = {"source": sources.get(prompt_id)}
    if alignment is not None:
        out["nearest_train_similarity"] = alignment.similarity.get(prompt_id)
    return out
