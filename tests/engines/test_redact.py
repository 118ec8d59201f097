"""Secrets out of what is shown and recorded (engines/redact.py), the same for every engine."""

from __future__ import annotations

from engines.redact import redact_args, redact_argv, redact_env


def test_redact_env_hides_tokens_keys_passwords_and_secrets() -> None:
    red = redact_env({"HF_TOKEN": "a", "OPENAI_API_KEY": "b", "DB_PASSWORD": "c",
                      "my_secret": "d", "AWS_SECRET_ACCESS_KEY": "e", "NCCL_ALGO": "Tree",
                      "PATH": "/bin"})
    assert red == {"HF_TOKEN": "***", "OPENAI_API_KEY": "***", "DB_PASSWORD": "***",
                   "my_secret": "***", "AWS_SECRET_ACCESS_KEY": "***", "NCCL_ALGO": "Tree",
                   "PATH": "/bin"}


def test_redact_argv_forms() -> None:
    assert redact_argv(["x", "--api-key", "k", "--api-key=k2", "--hf-token", "t", "--port",
                        "1"]) == ["x", "--api-key", "***", "--api-key=***", "--hf-token", "***",
                                  "--port", "1"]


def test_redact_args_hides_secret_flags_only():
    # `..._tokens` is no secret: a name pattern would hide the speculative shape
    assert redact_args({"api_key": "k", "hf_token": "t", "speculative_num_draft_tokens": 4,
                        "admin_api_key": None}) == {
        "api_key": "***", "hf_token": "***", "speculative_num_draft_tokens": 4,
        "admin_api_key": None}
