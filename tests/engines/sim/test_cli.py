"""Command-line resolution: SGLang flag names, unknown flags, speculative defaults."""

from __future__ import annotations

import subprocess
import sys

import pytest

from engines.sim.cli import SimArgError, parse_extra, resolve
from tests.engines.sim.conftest import REPO


def test_parse_extra_forms() -> None:
    flags, stray = parse_extra(["--mem-fraction-static", "0.8", "--enable-foo", "--x=3",
                                "--cuda-graph-bs", "1", "2", "4", "--name=a=b", "--neg", "-1",
                                "--flag", "false"])
    assert flags == {"mem_fraction_static": 0.8, "enable_foo": True, "x": 3,
                     "cuda_graph_bs": [1, 2, 4], "name": "a=b", "neg": -1, "flag": False}
    assert stray == []
    assert parse_extra(["stray", "--a"])[1] == ["stray"]


def test_known_and_unknown_flags() -> None:
    # 0.8: the default profile's weights take 69.4 of the 95.6 GiB per GPU, so a share of 0.7
    # would leave no KV cache and be refused (engines/sim/memory.py)
    cfg = resolve(["--model-path", "m", "--tp", "8", "--port=123", "--mem-fraction-static=0.8",
                   "--disable-cuda-graph", "--attention-backend", "fa3"], env={})
    assert cfg.tp_size == 8 and cfg.port == 123 and cfg.served_model_name == "m"
    assert cfg.not_modelled == ["attention_backend"]  # mem_fraction_static sizes the KV
    assert cfg.args["disable_cuda_graph"] is True  # modelled: no warning
    assert cfg.extra_flags["attention_backend"] == "fa3"


def test_speculative_resolution() -> None:
    auto = resolve(["--speculative-algorithm", "eagle3"], env={})
    assert (auto.speculative_num_steps, auto.speculative_eagle_topk,
            auto.speculative_num_draft_tokens) == (3, 1, 4)
    assert auto.max_running_requests == 48 and any("capped at 48" in n for n in auto.notes)
    forced = resolve(["--speculative-algorithm", "EAGLE", "--speculative-num-steps", "5",
                      "--speculative-num-draft-tokens", "8"], env={})
    assert forced.speculative_num_draft_tokens == 6  # topk=1 -> steps + 1, as SGLang
    tree = resolve(["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3",
                    "--speculative-eagle-topk", "4"], env={})
    assert tree.speculative_num_draft_tokens == 13
    ngram = resolve(["--speculative-algorithm", "NGRAM", "--speculative-adaptive"], env={})
    assert ngram.speculative_adaptive is False
    assert any("speculative_adaptive disabled" in n for n in ngram.notes)
    assert ngram.max_running_requests == 1024  # NGRAM is not capped at 48
    adaptive = resolve(["--speculative-algorithm", "EAGLE3", "--speculative-adaptive"], env={})
    assert adaptive.speculative_adaptive and adaptive.speculative_num_steps == 3  # middle of 0..7
    with pytest.raises(SimArgError, match="candidate_steps"):
        resolve(["--speculative-algorithm", "EAGLE3", "--speculative-adaptive",
                 "--speculative-num-steps", "2"], env={})


def test_bad_values() -> None:
    with pytest.raises(SimArgError):
        resolve(["--sim-error-rate", "1.5"], env={})
    with pytest.raises(SimArgError):
        resolve(["--sim-profile", "no-such-profile"], env={})


def test_main_refuses_bad_line_and_warns_on_unknown() -> None:
    r = subprocess.run([sys.executable, "-m", "engines.sim", "--sim-profile", "nope"],
                       cwd=REPO, capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "not found" in r.stderr
    r = subprocess.run([sys.executable, "-m", "engines.sim", "--port", "notanint"],
                       cwd=REPO, capture_output=True, text=True, timeout=30)
    assert r.returncode == 2


def test_automatic_speculative_params_follow_the_architecture() -> None:
    # SGLang 0.5.23 arg_groups/speculative_hook.py _auto_choose_speculative_params
    llama = resolve(["--speculative-algorithm", "EAGLE3", "--sim-model", "llama3.1-8b"], env={})
    assert (llama.speculative_num_steps, llama.speculative_eagle_topk,
            llama.speculative_num_draft_tokens) == (5, 4, 8)
    kimi = resolve(["--speculative-algorithm", "EAGLE3"], env={})  # DeepseekV3ForCausalLM
    assert (kimi.speculative_num_steps, kimi.speculative_eagle_topk,
            kimi.speculative_num_draft_tokens) == (3, 1, 4)
    standalone = resolve(["--speculative-algorithm", "STANDALONE", "--sim-model",
                          "llama3.1-8b"], env={})
    assert standalone.speculative_num_steps == 3


def test_unknown_hardware_or_model_profile_is_refused() -> None:
    with pytest.raises(SimArgError, match="hardware profile 'b300' not found"):
        resolve(["--sim-hardware", "b300"], env={})
    with pytest.raises(SimArgError, match="model profile 'gpt-9' not found"):
        resolve(["--sim-model", "gpt-9"], env={})
