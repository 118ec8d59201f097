"""scripts/train_models.py trains the same weights from the same recipe and text (seeded,
deterministic algorithms, a fixed thread count), in the engine environment's torch. A short
schedule (--steps-scale) keeps it to seconds; the full recipe is what CI trains for the
real-engine tests."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.real_engine


def _train(python: str, out: Path) -> dict:
    proc = subprocess.run([python, str(REPO / "scripts/train_models.py"), "--out", str(out),
                           "--steps-scale", "0.01"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == str(out.resolve())
    return json.loads((out / "manifest.json").read_text())


def test_same_recipe_same_weights(tmp_path, engines_python):
    a = _train(engines_python, tmp_path / "a")
    b = _train(engines_python, tmp_path / "b")
    assert set(a["weights_sha256"]) == {"target/model.safetensors", "drafter/model.safetensors"}
    assert a["weights_sha256"] == b["weights_sha256"]
    assert a["files"]["drafter_train.jsonl"] == b["files"]["drafter_train.jsonl"]
    record = json.loads((tmp_path / "a" / "recipe.json").read_text())
    target, drafter = record["models"]["target"], record["models"]["drafter"]
    assert target["steps"] == 12 and drafter["steps"] == 6  # 1 % of 1200 and 600
    assert target["loss_curve"][-1]["step"] == 12
    assert set(target["loss_by_domain"]) == {"coding", "agentic", "math", "chat",
                                             "encyclopedic"}
    assert drafter["parameters"] < target["parameters"]
    # the draft-model ladder beside them: the target itself at noise 0 agrees on every token
    ladder = json.loads((tmp_path / "a" / "ladder" / "ladder.json").read_text())["rungs"]
    assert list(ladder) == ["noise-0.00", "noise-0.10", "noise-0.20", "noise-0.35", "noise-0.60"]
    assert ladder["noise-0.00"]["greedy_agreement"] == 1.0
    assert ladder["noise-0.60"]["greedy_agreement"] < 1.0
    assert (tmp_path / "a" / "ladder" / "noise-0.20" / "model.safetensors").is_file()
    # a second call finds the folder complete and trains nothing
    again = subprocess.run([engines_python, str(REPO / "scripts/train_models.py"), "--out",
                            str(tmp_path / "a"), "--steps-scale", "0.01"],
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and "is complete" in again.stderr
