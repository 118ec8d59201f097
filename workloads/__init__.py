"""Prompt sets shipped with specgrid (written for this project, one JSON object per line:
prompt_id, domain, text) and, as they grow, the readers of a drafter's training data.

This package imports nothing from `grid`, `actors` or `engines`: the orchestrator and the
simulator may both use it."""

from pathlib import Path

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"
"""Where the shipped prompt sets live (package data, so an installed wheel has them)."""
