from __future__ import annotations

import pytest

from grid.plan.cells import (
    axis_overrides,
    expand_axes,
    group_by_server,
    make_cell,
    requests_for_cell,
    stable_hash,
    variant_label,
    workload_label,
)


def _config(variant="baseline", concurrency=1, args=None, env=None, timeout=300.0):
    return {
        "engine": {"name": "sim", "python": "/usr/bin/python3", "ready_timeout_s": 60.0,
                   "stop_timeout_s": 5.0, "api_key": None, "options": {"seed": 0}},
        "model": {"name": "m", "model_path": "m", "draft_model_path": None,
                  "served_model_name": None, "tp_size": 1},
        "variant": {"name": variant, "args": dict(args or {}), "env": dict(env or {}),
                    "tp_size": None, "speculative_disable_above_batch": None},
        "workload": {"name": "coding", "prompts": "coding.jsonl", "domains": [],
                     "endpoint": "generate", "max_new_tokens": 16, "temperature": 0.0,
                     "ignore_eos": True},
        "load": {"concurrency": concurrency, "rate": None, "arrival": "poisson",
                 "burstiness": 1.0, "num_requests": None, "requests_per_stream": 2.0,
                 "min_requests": 8, "duration_s": None, "warmup_requests": 2,
                 "request_timeout_s": timeout, "clients": 1, "seed": 0},
    }


def test_product_in_axis_order():
    combos = expand_axes({"variant": ["a", "b"], "concurrency": [1, 8]})
    assert combos == [
        {"variant": "a", "concurrency": 1}, {"variant": "a", "concurrency": 8},
        {"variant": "b", "concurrency": 1}, {"variant": "b", "concurrency": 8},
    ]


def test_exclude_and_include():
    combos = expand_axes(
        {"variant": ["baseline", "eagle3"], "variant.speculative_disable_above_batch": [None, 8]},
        include=[{"variant": "eagle3", "concurrency": 64}],
        exclude=[{"variant": "baseline", "variant.speculative_disable_above_batch": [8, 16]}],
    )
    assert {"variant": "baseline", "variant.speculative_disable_above_batch": 8} not in combos
    assert {"variant": "baseline", "variant.speculative_disable_above_batch": None} in combos
    assert combos[-1] == {"variant": "eagle3", "concurrency": 64}
    assert len(combos) == 4


@pytest.mark.parametrize("axes", [{"concurrency": []}, {"concurrency": 4}, {"variant": "a"}])
def test_bad_axes_are_rejected(axes):
    with pytest.raises(ValueError, match="grid.axes"):
        expand_axes(axes)


def test_overrides_select_groups_and_set_keys():
    assert axis_overrides({"variant": "eagle3", "concurrency": 8, "variant.env.NCCL_ALGO": "Ring",
                           "rate": None}) == [
        "variant=eagle3", "++load.concurrency=8", "++variant.env.NCCL_ALGO='Ring'",
        "++load.rate=null"]


def test_hash_ignores_key_order():
    assert stable_hash({"a": 1, "b": {"c": 2, "d": 3}}) == stable_hash({"b": {"d": 3, "c": 2},
                                                                          "a": 1})


def test_cell_id_is_stable_and_ignores_operational_fields():
    a = make_cell({"concurrency": 1}, _config(), "digest")
    b = make_cell({"concurrency": 1}, _config(timeout=10.0), "digest")
    assert a.cell_id == b.cell_id  # request timeout does not change what is measured
    assert a.cell_id == make_cell({"concurrency": 1}, _config(), "digest").cell_id
    assert a.cell_id != make_cell({"concurrency": 2}, _config(concurrency=2), "digest").cell_id
    assert a.cell_id != make_cell({"concurrency": 1}, _config(), "other-prompts").cell_id


def test_server_key_ignores_client_side_axes():
    c1 = make_cell({"concurrency": 1}, _config(concurrency=1), "d")
    c8 = make_cell({"concurrency": 8}, _config(concurrency=8), "d")
    spec = make_cell({}, _config(args={"speculative_algorithm": "EAGLE3"}), "d")
    nccl = make_cell({}, _config(env={"NCCL_ALGO": "Ring"}), "d")
    assert c1.server_key == c8.server_key
    assert len({c1.server_key, spec.server_key, nccl.server_key}) == 3


def test_grouping_keeps_grid_order():
    cells = [make_cell({"c": c}, _config(variant=v, concurrency=c,
                                         args={"x": 1} if v == "b" else {}), "d")
             for v in ("a", "b") for c in (1, 4)]
    groups = group_by_server(cells)
    assert [len(g.cells) for g in groups] == [2, 2]
    assert [c.concurrency for c in groups[0].cells] == [1, 4]
    assert groups[1].variant == "b"


def test_variant_label_names_factors():
    assert variant_label("eagle3", {"variant.speculative_disable_above_batch": 16,
                                    "concurrency": 4}) == "eagle3__off_above-16"
    assert variant_label("baseline", {"variant.env.NCCL_ALGO": "Ring"}) == \
        "baseline__nccl_algo-Ring"
    assert variant_label("eagle3", {"variant.speculative_disable_above_batch": None}) == "eagle3"
    # a folder stands by its last part, whichever machine's cache holds it
    assert variant_label("draft", {"variant.args.speculative_draft_model_path":
                                   "/home/u/.cache/m/trained-1/ladder/noise-0.20/"}) == \
        "draft__draft-noise-0.20"


def test_workload_label_names_workload_factors():
    assert workload_label("coding", {"workload.temperature": 0.7, "concurrency": 4,
                                     "variant.env.X": 1}) == "coding__temperature-0.7"
    assert workload_label("coding", {"concurrency": 4}) == "coding"
    # two cells that differ only in a workload setting are two points, one prompt set
    a = make_cell({"workload.temperature": 0.0}, _config(), "d")
    cfg = _config()
    cfg["workload"] = {**cfg["workload"], "temperature": 0.7}
    b = make_cell({"workload.temperature": 0.7}, cfg, "d")
    assert (a.workload, b.workload) == (f"{a.workload_name}__temperature-0.0",
                                        f"{a.workload_name}__temperature-0.7")
    assert a.workload_name == b.workload_name and a.cell_id != b.cell_id


def test_labels_name_every_swept_engine_model_and_load_setting():
    # an engine option, a model key and a load key each get a workload label part
    assert workload_label("coding", {"variant": "baseline", "concurrency": 1,
                                     "engine.options.hang_after_requests": 20}) == \
        "coding__hang_after_requests-20"
    assert workload_label("coding", {"model.revision": "abc123", "repeat": 2}) == \
        "coding__revision-abc123"
    assert workload_label("coding", {"load.arrival": "gamma", "workload.temperature": 0.7,
                                     "rate": 5.0}) == "coding__arrival-gamma__temperature-0.7"
    # an absolute model path stands by its last part; the load's columns show these
    assert workload_label("coding", {"model.model_path": "/cache/org/tiny-llm/",
                                     "load.concurrency": 4, "load.rate": 2.0,
                                     "load.repeat": 1}) == "coding__model_path-tiny-llm"
    # the setup's axes are named ahead of the variant (the report's setup), not in a label
    combo = {"engine": "vllm_cpu", "model": "tiny", "engine.options.hardware": "h200"}
    assert workload_label("coding", combo) == "coding"
    assert variant_label("eagle3", combo) == "eagle3"


def test_cells_differing_only_in_an_engine_option_are_told_apart():
    cells = []
    for hang in (100000, 20):
        cfg = _config()
        cfg["engine"] = {**cfg["engine"], "options": {"seed": 0, "hang_after_requests": hang}}
        cells.append(make_cell({"variant": "baseline", "concurrency": 1,
                                "engine.options.hang_after_requests": hang}, cfg, "d"))
    assert [c.describe() for c in cells] == [
        "baseline c=1 coding__hang_after_requests-100000",
        "baseline c=1 coding__hang_after_requests-20"]
    assert [g.label for g in group_by_server(cells)] == [
        "baseline hang_after_requests-100000", "baseline hang_after_requests-20"]
    # the label is not part of the id: the same cell without the axis keeps its id
    cfg = _config()
    cfg["engine"] = {**cfg["engine"], "options": {"seed": 0, "hang_after_requests": 20}}
    same = make_cell({"variant": "baseline", "concurrency": 1}, cfg, "d")
    assert same.workload == "coding" and same.cell_id == cells[1].cell_id


def test_a_cell_is_described_after_its_setup():
    cfg = _config(variant="eagle3", concurrency=4)
    cell = make_cell({"engine": "vllm_cpu", "model": "tiny", "variant": "eagle3",
                      "concurrency": 4}, cfg, "d")
    assert cell.describe() == "vllm_cpu · tiny · eagle3 c=4 coding"
    assert group_by_server([cell])[0].label == "vllm_cpu · tiny · eagle3"
    hw = make_cell({"engine.options.hardware": "h200", "concurrency": 4}, cfg, "d")
    assert hw.describe() == "h200 · eagle3 c=4 coding"
    assert make_cell({"concurrency": 4}, cfg, "d").describe() == "eagle3 c=4 coding"


def test_requests_per_cell():
    load = _config()["load"]
    assert requests_for_cell({**load, "concurrency": 1}) == 8  # the floor
    assert requests_for_cell({**load, "concurrency": 64}) == 128
    assert requests_for_cell({**load, "num_requests": 5}) == 5
