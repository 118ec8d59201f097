"""run.json: what a run folder records about the command line that started it."""

from __future__ import annotations

import json

import pytest

from grid.cli.runrecord import (
    read_run_record,
    record_report_settings,
    report_settings,
    resume_command,
    write_run_record,
)
from grid.plan.config import ConfigError


def test_record_keeps_the_latest_overrides_and_each_distinct_command(tmp_path):
    write_run_record(tmp_path, ["+sweep=smoke"])
    write_run_record(tmp_path, ["+sweep=smoke"])  # the same command again: a resume
    write_run_record(tmp_path, ["+sweep=smoke", "load.concurrency=1,2"])
    record = json.loads((tmp_path / "run.json").read_text())
    assert record["overrides"] == ["+sweep=smoke", "load.concurrency=1,2"]
    assert [h["overrides"] for h in record["history"]] == [
        ["+sweep=smoke"], ["+sweep=smoke", "load.concurrency=1,2"]]
    assert read_run_record(tmp_path) == ["+sweep=smoke", "load.concurrency=1,2"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]  # no temp file left


@pytest.mark.parametrize(("content", "message"), [
    (None, "not a run folder started by grid.run (no run.json)"),
    ("[1, 2]", "is not a run record"),
    ('{"report": {"gpu_hour_usd": 2.5}}', "not a run folder started by grid.run (no overrides "
                                           "in run.json)"),
    ('{"overrides": "+sweep=smoke"}', "'overrides' is not a list of strings"),
])
def test_unreadable_record_is_one_line(content, message, tmp_path):
    if content is not None:
        (tmp_path / "run.json").write_text(content)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        read_run_record(tmp_path)


def test_missing_folder(tmp_path):
    with pytest.raises(ConfigError, match="no such folder"):
        read_run_record(tmp_path / "nope")


def test_resume_command_quotes_the_absolute_folder(tmp_path):
    run_dir = tmp_path / "a run"
    assert resume_command(run_dir) == f"python -m grid.run --resume '{run_dir.resolve()}'"


def test_the_reports_settings_sit_beside_the_overrides_in_the_one_record(tmp_path):
    write_run_record(tmp_path, ["+sweep=smoke"])
    record_report_settings(tmp_path, {"gpu_hour_usd": 2.5, "slo": {"tpot_ms": 50}})
    assert report_settings(tmp_path) == {"gpu_hour_usd": 2.5, "slo": {"tpot_ms": 50}}
    assert read_run_record(tmp_path) == ["+sweep=smoke"]  # the overrides kept
    write_run_record(tmp_path, ["+sweep=smoke", "load.concurrency=1"])  # a later execution
    assert report_settings(tmp_path)["gpu_hour_usd"] == 2.5  # keeps the report's settings
    assert report_settings(tmp_path / "nosuch") == {}
