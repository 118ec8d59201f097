"""The recipe of the two small models specgrid *trains* to measure its core claim on a real
engine: a target that has read every shipped domain, and a draft model that has read only coding
and agentic text (docs/lesson.md). Pure (json and hashlib): the driver resolves
`${trained_model:target}` in conf/model/tiny_trained.yaml with it, without torch;
scripts/train_models.py trains the models (torch and transformers, in an engine environment).

What each model reads (all of it the project's own shipped text, nothing downloaded):

* the target: the benchmark prompts of the five domains (workloads/prompts/{coding,agentic,math,
  chat,encyclopedic}.jsonl) and every drafter-training sample (workloads/train_samples/), the
  files concatenated in that order, so a training window rarely crosses from one domain into
  another and the target learns that coding text is followed by more coding text;
* the draft model: only the coding and agentic rows of workloads/train_samples/ (never a
  benchmark prompt). Those rows are written out as they are, in ShareGPT / OpenAI-messages
  JSONL, to ``drafter_train.jsonl`` beside the weights: `model.drafter.train_data` points
  there, so the run's alignment figure is computed against the drafter's actual training data.

Both are plain causal LMs on the text (no chat roles): the chat template just concatenates the
messages' text, so a chat request asks the target to continue the prompt in its own domain.
The folder is named by a digest of the recipe, the template and the text: change any of it and
the models are trained again into a new folder."""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from engines.tiny_models import WORKLOADS, cache_root

TARGET_FILES = ("prompts/coding.jsonl", "prompts/agentic.jsonl", "prompts/math.jsonl",
                "prompts/chat.jsonl", "prompts/encyclopedic.jsonl",
                "train_samples/coding_agentic_sharegpt.jsonl",
                "train_samples/coding_agentic_messages.jsonl",
                "train_samples/encyclopedic_sharegpt.jsonl")
DRAFTER_FILES = ("train_samples/coding_agentic_sharegpt.jsonl",
                 "train_samples/coding_agentic_messages.jsonl")
DRAFTER_DOMAINS = ("coding", "agentic")

# Every number that shapes the weights. The target has the tiny Llama's shape
# (engines/tiny_models.py); the draft model is the same width with one layer, a quarter of the
# target's decoder. Steps are sized so both train in about 3 minutes on 2 cores (~0.1 s/step
# for the target at batch 16 x 128 tokens, measured with torch 2.14 on CPU).
TRAIN_RECIPE: dict[str, Any] = {
    "recipe_version": 1,
    "seed": 20261201,
    "torch_threads": 2,       # fixed: the float reduction order (and so the weights) follows it
    "vocab_size": 512,        # byte-level BPE trained on the target's text
    "seq_len": 128,
    "batch_size": 16,
    "lr": 3e-3,
    "warmup_steps": 30,
    "weight_decay": 0.01,
    "target": {"num_hidden_layers": 4, "hidden_size": 128, "intermediate_size": 256,
               "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
               "steps": 1200},
    "drafter": {"num_hidden_layers": 1, "hidden_size": 128, "intermediate_size": 256,
                "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
                "steps": 600},
    "max_position_embeddings": 4096,
    "rope_theta": 10000.0,
}
TEXT_TEMPLATE = ("{{ bos_token }}{% for m in messages %}"
                 "{% if m['content'] is string %}{{ m['content'] }}"
                 "{% else %}{% for p in m['content'] %}{% if p['type'] == 'text' %}{{ p['text'] }}"
                 "{% endif %}{% endfor %}{% endif %}{{ '\\n' }}{% endfor %}")
"""The chat template of both models: the messages' text, one per line, after <|bos|> (a base
model's view of a conversation: the reply continues the prompt)."""
SEPARATOR = "\n\n"
"""Between two rows in the training text (no EOS: a request generates past it anyway)."""


def _texts(row: dict[str, Any]) -> Iterator[str]:
    """The text of one shipped row: a prompt's `text`, or every turn of a conversation."""
    if isinstance(row.get("text"), str):
        yield row["text"]
    for turn in row.get("conversations") or []:
        yield str(turn.get("value") or "")
    for turn in row.get("messages") or []:
        content = turn.get("content")
        if isinstance(content, str):
            yield content
        elif isinstance(content, list):
            yield "".join(str(p.get("text") or "") for p in content if isinstance(p, dict))


def _rows(relative: str) -> Iterator[dict[str, Any]]:
    for raw in (WORKLOADS / relative).read_text(encoding="utf-8").splitlines():
        if raw.strip():
            yield json.loads(raw)


def drafter_rows() -> list[dict[str, Any]]:
    """The draft model's training rows, unchanged: the coding and agentic rows of DRAFTER_FILES."""
    return [row for f in DRAFTER_FILES for row in _rows(f) if row.get("domain") in DRAFTER_DOMAINS]


def write_drafter_data(path: Path) -> int:
    """Write the drafter's training rows, unchanged, one JSON object per line; returns rows."""
    rows = drafter_rows()
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return len(rows)


def documents(which: str) -> list[str]:
    """The training documents of `target` or `drafter`, in order (one per row)."""
    rows = ([row for f in TARGET_FILES for row in _rows(f)] if which == "target"
            else drafter_rows())
    return ["\n".join(t for t in _texts(row) if t) for row in rows]


LADDER_RECIPE: dict[str, Any] = {
    "seed": 20261205,
    # Noise on every weight of the trained target, as a fraction of that tensor's own standard
    # deviation: 0 is the target itself (every draft accepted, greedy), the largest is rarely
    # accepted. Chosen so that vLLM's measured accept length (4 drafts per step, greedy,
    # agentic prompts) spans ~1.2 to 5 in steps a break-even curve can interpolate
    # between (docs/lesson.md "A ladder of drafters"; greedy agreement per rung is in
    # ladder/ladder.json).
    "noise": [0.0, 0.1, 0.2, 0.35, 0.6],
}
"""The draft-model ladder: near-copies of the trained target (same shape, so the same cost per
draft pass) of graded quality, for the break-even acceptance measured without forcing it."""


def ladder_name(noise: float) -> str:
    """The folder of one rung under the trained root: `ladder/noise-0.20`."""
    return f"ladder/noise-{noise:.2f}"


def digest() -> str:
    h = hashlib.sha256(json.dumps(TRAIN_RECIPE, sort_keys=True).encode())
    h.update(TEXT_TEMPLATE.encode())
    for which in ("target", "drafter"):
        for doc in documents(which):
            h.update(doc.encode())
            h.update(b"\0")
    return h.hexdigest()[:16]


@functools.lru_cache(maxsize=1)
def recipe_digest() -> str:
    """The digest of the recipe and its training text (reads the shipped text once)."""
    return digest()


def trained_root() -> Path:
    """The folder of the current recipe: <cache>/trained-<digest>/ (the tiny models' cache)."""
    return cache_root() / f"trained-{recipe_digest()}"


def model_dir(name: str) -> Path:
    """`target`, `drafter`, or `drafter_train.jsonl` (the drafter's training data) of the
    current recipe; they exist once scripts/train_models.py ran."""
    return trained_root() / name
