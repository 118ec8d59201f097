"""The recipe of the tiny models specgrid runs real engines with on a CPU, and where they are
cached. Pure (json and hashlib): the driver resolves `${tiny_model:target}` in conf/model/tiny.yaml
with it, without torch; scripts/tiny_models.py builds the models (with torch and transformers,
in an engine environment) from the same recipe.

The models are seeded random numbers (or derived from the target) and a byte-level BPE tokenizer
trained on the project's own shipped text, so the folder is named by a digest of the recipe, the
chat template and that text: change any of it and the models are rebuilt in a new folder."""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

WORKLOADS = Path(__file__).resolve().parents[1] / "workloads"
"""The shipped text the tokenizer is trained on (beside this package in a checkout and in
site-packages alike)."""
CORPUS_GLOBS = ("prompts/*.jsonl", "train_samples/*.jsonl")
CACHE_ENV = "SPECGRID_TINY_MODELS"
"""Overrides the cache folder (default ~/.cache/specgrid/tiny-models)."""

# The recipe: every number that shapes the output. Changing any of it changes the digest.
RECIPE = {
    "recipe_version": 1,
    "seed": 1234,
    "vocab_size": 512,          # 256 byte symbols + 8 special tokens + 248 BPE merges
    "hidden_size": 128,
    "intermediate_size": 256,   # 2 x hidden: the smallest sensible SwiGLU MLP
    "num_hidden_layers": 4,     # enough for three distinct EAGLE-3 aux layers
    "num_attention_heads": 4,
    "num_key_value_heads": 2,   # GQA 2:1, as in real Llama-3 models
    "head_dim": 32,             # 4 heads x 32 = hidden 128
    "max_position_embeddings": 4096,
    "rope_theta": 10000.0,
    "init_std": 0.02,           # transformers' default initializer_range
    "near_noise_std": 0.001,    # draft-near: N(0, 0.001) on every weight, ~5 % of init_std
    # vLLM's aux id k = the target's residual stream after k layers (0 = embeddings, 4 = the
    # last layer's output before the final norm), llama.py / interfaces.py _maybe_add_hidden_state
    "eagle3_aux_layers": [1, 2, 4],
}
SPECIALS = ["<|pad|>", "<|bos|>", "<|eos|>", "<|system|>", "<|user|>", "<|assistant|>",
            "<|tool|>", "<|unk|>"]
# One turn = "<|role|>\n" content "<|eos|>\n"; generation starts after "<|assistant|>\n" and
# stops at <|eos|>. Message content may be a string or a list of OpenAI text parts.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}"
    "{{ '<|' + m['role'] + '|>\\n' }}"
    "{% if m['content'] is string %}{{ m['content'] }}"
    "{% else %}{% for p in m['content'] %}{% if p['type'] == 'text' %}{{ p['text'] }}"
    "{% endif %}{% endfor %}{% endif %}{{ '<|eos|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}")


def corpus_lines() -> list[str]:
    """Every string in the shipped jsonl files (read-only), in a fixed order."""
    def strings(obj: object) -> Iterator[str]:
        if isinstance(obj, str):
            yield obj
        elif isinstance(obj, dict):
            for v in obj.values():
                yield from strings(v)
        elif isinstance(obj, list):
            for v in obj:
                yield from strings(v)
    lines: list[str] = []
    for pattern in CORPUS_GLOBS:
        for path in sorted(WORKLOADS.glob(pattern)):
            for raw in path.read_text(encoding="utf-8").splitlines():
                if raw.strip():
                    lines.extend(s for s in strings(json.loads(raw)) if len(s) > 3)
    if not lines:  # run outside a checkout: generated text, still deterministic
        words = "the a model token server batch draft accept speed cache queue request".split()
        lines = [" ".join(words[(i * 7 + j * 3) % len(words)] for j in range(12))
                 for i in range(2000)]
    return lines


def digest(lines: list[str]) -> str:
    h = hashlib.sha256(json.dumps(RECIPE, sort_keys=True).encode())
    h.update(CHAT_TEMPLATE.encode())
    for line in lines:
        h.update(line.encode())
    return h.hexdigest()[:16]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def complete(out: Path) -> bool:
    try:
        manifest = json.loads((out / "manifest.json").read_text())
        return all((out / f).is_file() and (out / f).stat().st_size == meta["size"]
                   and sha256(out / f) == meta["sha256"] for f, meta in manifest["files"].items())
    except (OSError, ValueError, KeyError):
        return False



def cache_root() -> Path:
    """Where built models go: $SPECGRID_TINY_MODELS, else ~/.cache/specgrid/tiny-models."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache/specgrid/tiny-models")


@functools.lru_cache(maxsize=1)
def recipe_digest() -> str:
    """The digest of the recipe and its training text (reads the shipped text once)."""
    return digest(corpus_lines())


def model_dir(name: str) -> Path:
    """The folder of one tiny model (`target`, `draft-near`, `draft-1layer`, `eagle3-random`,
    `eagle3-repeat`) for the current recipe; it exists once scripts/tiny_models.py ran."""
    return cache_root() / recipe_digest() / name
