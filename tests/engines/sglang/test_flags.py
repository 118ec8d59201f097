"""Version-aware flag building: full names, stable order, renames and FlagErrors."""

from __future__ import annotations

import pytest

from engines.sglang.flags import flag_name, normalize_args, server_args_to_argv
from engines.sglang.versions import at_least, parse_version
from engines.validation import FlagError


def test_flag_name_and_basic_values() -> None:
    assert flag_name("speculative_num_steps") == "--speculative-num-steps"
    argv = server_args_to_argv(
        {"disable_radix_cache": True, "enable_torch_compile": False, "chunked_prefill_size": None,
         "cuda_graph_bs_decode": [1, 2, 4], "json_model_override_args": {"b": 1, "a": [2]},
         "mem_fraction_static": 0.8}, None)
    assert argv == [
        "--cuda-graph-bs-decode", "1", "2", "4",
        "--disable-radix-cache",
        "--json-model-override-args", '{"a": [2], "b": 1}',
        "--mem-fraction-static", "0.8",
    ]


def test_stable_order_leading_fields_first() -> None:
    args = {"speculative_num_steps": 3, "zzz": 1, "max_running_requests": 64,
            "model_path": "m", "speculative_algorithm": "EAGLE3", "aaa": 2}
    argv = server_args_to_argv(args, "0.5.23")
    assert argv == ["--model-path", "m", "--max-running-requests", "64",
                    "--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3",
                    "--aaa", "2", "--zzz", "1"]
    assert server_args_to_argv(dict(reversed(list(args.items()))), "0.5.23") == argv


@pytest.mark.parametrize(("version", "flag"), [
    ("0.5.10", "--cuda-graph-max-bs"),
    ("0.5.13", "--cuda-graph-max-bs"),
    ("0.5.13.post1", "--cuda-graph-max-bs"),
    ("0.5.14", "--cuda-graph-max-bs-decode"),
    ("0.5.19", "--cuda-graph-max-bs-decode"),
    ("0.5.20", "--cuda-graph-max-bs-decode"),
    ("0.5.23", "--cuda-graph-max-bs-decode"),
    (None, "--cuda-graph-max-bs"),
])
def test_cuda_graph_max_bs_by_version(version: str | None, flag: str) -> None:
    assert server_args_to_argv({"cuda_graph_max_bs": 64}, version) == [flag, "64"]


@pytest.mark.parametrize(("version", "flag"), [
    ("0.5.13", "--cuda-graph-max-bs"),
    ("0.5.23", "--cuda-graph-max-bs-decode"),
    (None, "--cuda-graph-max-bs-decode"),
])
def test_new_name_maps_back_on_old_versions(version: str | None, flag: str) -> None:
    assert server_args_to_argv({"cuda_graph_max_bs_decode": 32}, version) == [flag, "32"]


def test_cuda_graph_bs_list_renamed() -> None:
    assert server_args_to_argv({"cuda_graph_bs": [1, 8]}, "0.5.23") == [
        "--cuda-graph-bs-decode", "1", "8"]
    assert server_args_to_argv({"cuda_graph_bs_decode": [1, 8]}, "0.5.12") == [
        "--cuda-graph-bs", "1", "8"]


def test_both_spellings_conflict() -> None:
    with pytest.raises(FlagError, match="cuda_graph_max_bs.*give only one") as e:
        server_args_to_argv({"cuda_graph_max_bs": 64, "cuda_graph_max_bs_decode": 32}, "0.5.23")
    assert e.value.field == "cuda_graph_max_bs_decode" and e.value.version == "0.5.23"
    same = {"cuda_graph_max_bs": 64, "cuda_graph_max_bs_decode": 64}
    assert server_args_to_argv(same, "0.5.23") == ["--cuda-graph-max-bs-decode", "64"]


def test_flashinfer_fusion_switch_and_backend() -> None:
    switch = {"enable_flashinfer_allreduce_fusion": True}
    assert server_args_to_argv(switch, "0.5.13") == ["--enable-flashinfer-allreduce-fusion"]
    assert server_args_to_argv(switch, "0.5.14") == [
        "--flashinfer-allreduce-fusion-backend", "auto"]
    assert server_args_to_argv(switch, None) == ["--enable-flashinfer-allreduce-fusion"]
    both = {**switch, "flashinfer_allreduce_fusion_backend": "trtllm"}
    assert server_args_to_argv(both, "0.5.23") == [
        "--flashinfer-allreduce-fusion-backend", "trtllm"]
    assert server_args_to_argv({"flashinfer_allreduce_fusion_backend": "auto"}, "0.5.13") == [
        "--enable-flashinfer-allreduce-fusion"]
    with pytest.raises(FlagError, match=r"flashinfer_allreduce_fusion_backend.*SGLang 0\.5\.13"):
        server_args_to_argv({"flashinfer_allreduce_fusion_backend": "mnnvl"}, "0.5.13")
    assert server_args_to_argv({"enable_flashinfer_allreduce_fusion": False}, "0.5.23") == []


def test_flag_missing_in_version_names_field_and_version() -> None:
    with pytest.raises(FlagError) as e:
        server_args_to_argv({"speculative_adaptive": True}, "0.5.10")
    assert "speculative_adaptive" in str(e.value) and "0.5.10" in str(e.value)
    assert e.value.field == "speculative_adaptive" and e.value.version == "0.5.10"
    # a false switch emits nothing, so it is no error
    assert server_args_to_argv({"speculative_adaptive": False}, "0.5.10") == []


def test_unknown_version_emits_as_given() -> None:
    args = {"cuda_graph_max_bs": 8, "cuda_graph_max_bs_decode": 16}
    assert normalize_args(args, None) == args


def test_versions_helpers() -> None:
    assert parse_version(None) is None and parse_version("") is None
    assert str(parse_version("0.5.13.post1")) == "0.5.13.post1"
    with pytest.raises(FlagError, match="not an SGLang version"):
        parse_version("latest")
    from packaging.version import Version
    assert at_least("0.5.14rc1", Version("0.5.14")) is True
    assert at_least(None, Version("0.5.14")) is None


def test_removed_flag_error_suggests_replacement() -> None:
    # only reachable for a field with `until` and no merge rule; simulate through the table
    from engines.sglang import versions
    span = versions.FlagSpan("old_knob", until=versions.Version("0.5.1"), replacement="new_knob")
    versions.FLAG_SPANS["old_knob"] = span
    try:
        with pytest.raises(FlagError, match=r"old_knob.*removed after 0\.5\.1.*use new_knob"):
            server_args_to_argv({"old_knob": 1}, "0.5.23")
    finally:
        del versions.FLAG_SPANS["old_knob"]
