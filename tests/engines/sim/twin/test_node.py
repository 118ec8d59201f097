"""The node a twin is fitted to (engines/sim/twin/node.py): a shipped hardware profile, and the
model's shapes from a shipped profile or from the served model's own config.json."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from engines.sim.profile import MODEL_DIR
from engines.sim.twin import node, synthetic
from tests.engines.sim.twin.ground_truth import truth

# The trained target's shape (engines/trained_models.py TRAIN_RECIPE, scripts/train_models.py:
# untied embeddings, saved in bfloat16).
TARGET = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 128,
          "intermediate_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2,
          "head_dim": 32, "num_hidden_layers": 4, "vocab_size": 512,
          "max_position_embeddings": 4096, "tie_word_embeddings": False,
          "torch_dtype": "bfloat16"}
DRAFTER = {**TARGET, "num_hidden_layers": 1}


def test_parameters_are_counted_from_the_config():
    # by hand: embeddings 512 x 128 = 65,536; per layer q 128x128 + k, v 128x64 each + o
    # 128x128 = 49,152, MLP 3 x 128 x 256 = 98,304, two norms 256 -> 147,712; four layers
    # 590,848; final norm 128; untied lm_head 65,536
    assert node.params(TARGET) == 722_048
    assert node.params(DRAFTER) == 722_048 - 3 * 147_712
    assert node.params({**TARGET, "tie_word_embeddings": True}) == 722_048 - 65_536


def test_a_model_profile_is_built_from_config_json():
    start = json.loads((MODEL_DIR / "llama3.1-8b.json").read_text())
    md = node.model_from_config("tiny_trained", TARGET, DRAFTER, start)
    assert (md["layers"], md["hidden"], md["heads"], md["kv_heads"], md["head_dim"]) == \
        (4, 128, 4, 2, 32)
    assert md["dense_params_b"] == pytest.approx(722_048e-9)
    assert md["draft_params_b"] == pytest.approx(278_912e-9)
    assert md["draft_layers"] == 1 and md["weight_bytes"] == 2.0
    assert md["context_length"] == 4096
    assert md["acceptance"] == start["acceptance"]  # the drafter's chains start from start's
    fp32 = node.model_from_config("m", {**TARGET, "torch_dtype": "float32"}, None, start)
    assert fp32["weight_bytes"] == 4.0 and fp32["draft_params_b"] == 0.0


def _vllm_cells(tmp_path):
    target, draft = tmp_path / "target", tmp_path / "drafter"
    for folder, config in ((target, TARGET), (draft, DRAFTER)):
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(config))
    spec = json.dumps({"method": "draft_model", "model": str(draft),
                       "num_speculative_tokens": 4})
    base_cmd = (f"python -m vllm.entrypoints.openai.api_server --model {target} "
                "--served-model-name tiny-trained --dtype bfloat16 --max-num-seqs 64")
    cells = synthetic.cells(truth(), [1, 4], noise=0.0)
    return [replace(c, engine="vllm", model="tiny_trained", server_command=base_cmd + (
        f" --speculative-config '{spec}'" if c.variant != "baseline" else "")) for c in cells]


def test_a_model_no_profile_describes_is_read_from_the_servers_folder(tmp_path):
    hw, md = node.node_data(_vllm_cells(tmp_path), "cpu", None)
    assert hw == "cpu"
    assert isinstance(md, dict)
    assert md["name"] == "tiny_trained"
    assert md["dense_params_b"] == pytest.approx(722_048e-9)
    assert md["draft_params_b"] == pytest.approx(278_912e-9)  # the draft model's own config
    prof = node.node_profile(hw, md)
    assert prof.model_spec.layers == 4 and prof.hardware.name == "cpu"


def test_a_model_folder_given_is_read(tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    (other / "config.json").write_text(json.dumps({**TARGET, "num_hidden_layers": 2}))
    _, md = node.node_data(_vllm_cells(tmp_path), "cpu", str(other))
    assert isinstance(md, dict) and md["layers"] == 2


def test_a_shipped_model_stays_a_name():
    cells = synthetic.cells(truth(), [1, 4], noise=0.0)
    assert node.node_data(cells, "h200", None) == ("h200", "llama3.1-8b")


@pytest.mark.parametrize(("config", "message"), [
    ({"hidden_size": 8}, "not a dense decoder's config"),
    ({**TARGET, "num_local_experts": 8}, "a mixture-of-experts config")])
def test_a_config_that_is_no_dense_decoder_is_refused(tmp_path, config, message):
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=message):
        node.read_config(tmp_path)


def test_cells_of_two_engines_or_two_drafters_are_refused(tmp_path):
    cells = _vllm_cells(tmp_path)
    node.one_server_family(cells)  # one engine, one draft model: fitted
    assert node.drafter(cells[-1]) == ("draft_model", str(tmp_path / "drafter"))
    with pytest.raises(ValueError, match="cells of engines sglang, vllm: fit a twin to one "
                                         "engine's cells at a time"):
        node.one_server_family([*cells, replace(cells[0], engine="sglang")])
    head = json.dumps({"method": "eagle3", "model": "/m/head", "num_speculative_tokens": 3})
    other = replace(cells[-1], cell_id="x", variant="eagle3_head",
                    server_command=f"vllm --speculative-config '{head}'")
    with pytest.raises(ValueError, match=r"cells of 2 drafters \(eagle3: draft_model "
                                         r"drafter; eagle3_head: eagle3 head\)"):
        node.one_server_family([*cells, other])


def test_drafters_of_known_acceptance_may_differ_in_quality_not_in_shape(tmp_path):
    cells = _vllm_cells(tmp_path)
    noisy = tmp_path / "noisy"  # another drafter of the same shape (a rung of a ladder)
    noisy.mkdir()
    (noisy / "config.json").write_text(json.dumps(DRAFTER))
    spec = json.dumps({"method": "draft_model", "model": str(noisy), "num_speculative_tokens": 4})
    rung = replace(cells[-1], cell_id="rung", variant="rung",
                   server_command=f"vllm --speculative-config '{spec}'")
    with pytest.raises(ValueError, match="cells of 2 drafters"):
        node.one_server_family([*cells, rung])  # acceptance modelled: one drafter only
    known = [replace(c, known_acceptance=(0.5,)) if c.variant != "baseline" else c
             for c in [*cells, rung]]
    node.one_server_family(known)
    (noisy / "config.json").write_text(json.dumps({**DRAFTER, "num_hidden_layers": 2}))
    with pytest.raises(ValueError, match=r"drafters of different shapes \(eagle3, rung\)"):
        node.one_server_family(known)


def test_a_vllm_draft_model_is_standalone_and_its_twin_models_it_as_fitted(tmp_path):
    from engines.sim.twin.document import build

    cells = _vllm_cells(tmp_path)
    assert [node.algorithm(c) for c in cells] == [None, None, "STANDALONE", "STANDALONE"]
    doc = build(cells, run_id="RUN", hardware="cpu", replicates=0)
    # the closed form fitted the draft model at its own size with EAGLE3's factors; the
    # shipped STANDALONE entry (4x the draft cost of an EAGLE head) would double count it
    assert doc["algorithms"]["STANDALONE"] == doc["algorithms"]["EAGLE3"]
    assert doc["calibration"]["envelope"]["algorithms"] == ["STANDALONE"]
