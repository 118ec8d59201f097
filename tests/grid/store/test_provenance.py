from __future__ import annotations

from grid.store.provenance import recorded_env, redact_info


def test_recorded_env_keeps_gpu_server_variables_and_redacts_secrets():
    env = {"PATH": "/bin", "HOME": "/root", "NCCL_ALGO": "Ring", "CUDA_VISIBLE_DEVICES": "0,1",
           "HF_TOKEN": "hf_secret", "MY_FLAG": "1", "SGLANG_API_KEY": "k"}
    assert recorded_env(env, {"MY_FLAG": "1"}) == {
        "CUDA_VISIBLE_DEVICES": "0,1", "HF_TOKEN": "***", "MY_FLAG": "1", "NCCL_ALGO": "Ring",
        "SGLANG_API_KEY": "***"}


def test_server_info_secrets_are_redacted_at_any_depth():
    info = {"api_key": "s3cret", "hf_token": None, "tp_size": 8,
            "internal_states": [{"admin_api_key": "x", "avg_spec_accept_length": 2.5}]}
    assert redact_info(info) == {"api_key": "***", "hf_token": None, "tp_size": 8,
                                 "internal_states": [{"admin_api_key": "***",
                                                      "avg_spec_accept_length": 2.5}]}
