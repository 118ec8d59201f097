"""Workload prompt files: JSON lines with prompt_id, domain and text, shipped in workloads/prompts/.
Each prompt carries the domain it was written for, so acceptance can be reported per domain
and a workload can be checked against the drafter's training distribution."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from actors.loadgen.spec import Prompt
from workloads import PROMPTS_DIR


def prompts_path(name: str) -> Path:
    path = Path(name)
    return path if path.is_absolute() else PROMPTS_DIR / path


def load_prompts(workload: Mapping[str, Any]) -> tuple[tuple[Prompt, ...], str]:
    """The workload's prompts (filtered by its domains) and a digest of their content."""
    path = prompts_path(workload["prompts"])
    if not path.is_file():
        raise FileNotFoundError(f"workload {workload['name']!r}: prompt file {path} not found")
    prompts = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            prompts.append(Prompt(str(item["prompt_id"]), str(item["text"]), str(item["domain"])))
        except (ValueError, KeyError) as e:
            raise ValueError(f"{path}:{n}: not a prompt record ({e})") from None
    domains = list(workload.get("domains") or [])
    if domains:
        prompts = [p for p in prompts if p.domain in domains]
    if not prompts:
        raise ValueError(f"workload {workload['name']!r} has no prompts (domains={domains})")
    digest = hashlib.sha256(
        json.dumps([[p.prompt_id, p.domain, p.text] for p in prompts]).encode()).hexdigest()[:16]
    return tuple(prompts), digest
