"""Prompt sets shipped with specgrid (written for this project, one JSON object per line:
prompt_id, domain, source, text), training-like samples standing for a drafter's training mix,
and the code that reads a drafter's training data, samples benchmark prompts from it and checks
how well a workload matches it:

- loaders.py: streaming readers (JSONL, ShareGPT, OpenAI messages, Parquet, directories);
- sampler.py: seeded stratified sampling (by source or domain, holdout splits);
- reference.py: what a drafter is compared with (its data, or rows standing for its mix);
- alignment.py: nearest-neighbour TF-IDF similarity and the alignment figure.

This package imports nothing from `grid`, `actors` or `engines`: the orchestrator and the
simulator both use it."""

from pathlib import Path

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"
"""Where the shipped prompt sets live (package data, so an installed wheel has them)."""
TRAIN_SAMPLES_DIR = Path(__file__).resolve().parent / "train_samples"
"""Shipped training-like rows (by data-set family) that stand for a drafter's training mix."""
