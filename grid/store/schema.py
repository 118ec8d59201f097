"""The data contract of results/<run_id>/ as Arrow schemas (see docs/architecture.md).

Times are float seconds: `*_at` columns are Unix epoch seconds, `*_s` columns are durations.
`variant` and `workload` are hive partition columns (folder names), not stored in the files."""

from __future__ import annotations

import pyarrow as pa


def _schema(fields: list[tuple[str, pa.DataType]]) -> pa.Schema:
    return pa.schema(fields)


PARTITION_SCHEMA = _schema([("variant", pa.string()), ("workload", pa.string())])

_STREAM_FIELDS: list[tuple[str, pa.DataType]] = [
    ("ttft_s", pa.float64()),
    ("e2e_s", pa.float64()),
    ("tpot_s", pa.float64()),
    ("itl_s", pa.list_(pa.float64())),
    ("accept_length", pa.float64()),
    ("spec_verify_ct", pa.int64()),
    ("finish_reason", pa.string()),
]
"""Timing and outcome of one streamed request: shared by request rows and conversation rounds
(definitions in specgrid_metrics/requests.py)."""

_CELL_CONTEXT_FIELDS: list[tuple[str, pa.DataType]] = [
    ("run_id", pa.string()),
    ("cell_id", pa.string()),
    ("engine", pa.string()),
    ("simulated", pa.bool_()),
    ("concurrency", pa.int64()),
    ("rate", pa.float64()),
    ("attempt", pa.int64()),
]
"""Which run, cell and attempt a streamed request or conversation round belongs to, and the
load it ran under: the leading columns of request rows and conversation rounds."""

REQUEST_FIELDS = _schema([
    *_CELL_CONTEXT_FIELDS,
    ("request_id", pa.string()),
    ("prompt_id", pa.string()),
    ("domain", pa.string()),
    ("status", pa.string()),
    ("error", pa.string()),
    ("input_tokens", pa.int64()),
    ("output_tokens", pa.int64()),
    ("scheduled_at", pa.float64()),
    ("sent_at", pa.float64()),
    *_STREAM_FIELDS,
    # Workload provenance (grid/plan/workloads.py): the prompt's source label and, for speculative
    # cells, its similarity to the drafter's training data (workloads/alignment.py).
    ("source", pa.string()),
    ("nearest_train_similarity", pa.float64()),
    # load generator detail (actors/loadgen/spec.py ROW_KEYS, docs/loadgen.md)
    ("accept_length_decode", pa.float64()),
    # the server's acceptance histogram of the request: [n] = its verify steps that accepted
    # exactly n draft tokens (SGLang's spec_correct_drafts_histogram, vLLM's
    # acceptance_histogram; null where the server gives none)
    ("accept_histogram", pa.list_(pa.int64())),
    ("chunk_offset_us", pa.list_(pa.int32())),
    ("chunk_tokens", pa.list_(pa.int32())),
    ("chunk_gap_s", pa.list_(pa.float64())),
    ("merged_reads", pa.int64()),
    # the server's own clock (SGLang's /generate meta_info, with --enable-metrics): time in its
    # queue and from receiving the request to its first token, in seconds
    ("server_queue_s", pa.float64()),
    ("server_ttft_s", pa.float64()),
    # what was generated (actors/loadgen/rows.py), for the losslessness check
    # (grid/analysis/lossless.py): blake2b-128 hex of the output text and its length in
    # characters (completed requests), and the text itself, cut at 16384 characters, at
    # temperature 0 only (greedy outputs are compared with the baseline's)
    ("output_hash", pa.string()),
    ("output_chars", pa.int64()),
    ("output_text", pa.string()),
])

CELL_FIELDS = _schema([
    ("run_id", pa.string()),
    ("cell_id", pa.string()),
    ("server_key", pa.string()),
    ("attempt", pa.int64()),
    ("status", pa.string()),
    ("error", pa.string()),
    ("engine", pa.string()),
    ("simulated", pa.bool_()),
    ("model", pa.string()),
    ("concurrency", pa.int64()),
    ("rate", pa.float64()),
    ("max_in_flight", pa.int64()),
    ("num_requests", pa.int64()),
    ("factors", pa.string()),
    ("temperature", pa.float64()),
    ("requests_ok", pa.int64()),
    ("requests_error", pa.int64()),
    ("error_rate", pa.float64()),
    ("output_tok_s", pa.float64()),
    ("req_s", pa.float64()),
    *[(f"{m}_{q}_s", pa.float64()) for m in ("ttft", "tpot", "itl", "e2e")
      for q in ("p50", "p90", "p99")],
    ("accept_length", pa.float64()),
    ("duration_s", pa.float64()),
    ("client_saturated", pa.bool_()),
    ("saturation_reason", pa.string()),
    ("dispatch_lag_p50_s", pa.float64()),
    ("dispatch_lag_p99_s", pa.float64()),
    ("started_at", pa.float64()),
    ("finished_at", pa.float64()),
    ("server_command", pa.string()),
    ("server_env", pa.string()),
    ("engine_version", pa.string()),
    # What the plan gave the cell's engine, so a report reads facts instead of parsing the
    # command back: the engine's own options as JSON (engine.options: the simulator's profile,
    # hardware and model names, time_scale, ...), the variant's args as JSON (ServerArgs
    # names: speculative algorithm and shape, max_running_requests, ...), its speculation
    # threshold, its depth schedule as JSON ([[from batch, depth], ...]) and whether the
    # engine adapts the depth itself. Run folders written before these columns read them as
    # null (unknown).
    ("engine_options", pa.string()),
    ("server_args", pa.string()),
    ("speculative_disable_above_batch", pa.int64()),
    ("speculative_depth", pa.string()),
    ("speculative_adaptive", pa.bool_()),
    # The acceptance the engine was made to force (engines/forced.py: the length or rates and
    # the mean length, JSON; null = the drafter's own): such a cell is performance only.
    ("forced_acceptance", pa.string()),
    ("device", pa.string()),
    ("source", pa.string()),
    ("server_info", pa.string()),
    ("server_offers", pa.string()),
    ("cuda_visible_devices", pa.string()),
    # Speculative cells: the workload's alignment with the drafter's training data or mix
    # (docs/workloads.md), whether it passes the threshold, and what it was measured against.
    ("alignment", pa.float64()),
    ("alignment_ok", pa.bool_()),
    ("alignment_reference", pa.string()),
    ("gpu_ids", pa.string()),
    ("node_id", pa.string()),
    ("node_ip", pa.string()),
    ("hostname", pa.string()),
    # the start of the server process that served the cell (grid/store/rows.py ServerFacts):
    # when (epoch s; with server_key it names the start, shared by the cells it served), seconds
    # to its first ready answer, and the engine's own start-up phases as JSON {phase: seconds}
    ("server_started_at", pa.float64()),
    ("server_startup_s", pa.float64()),
    ("server_startup_phases", pa.string()),
    # load generator (grid/store/clientstats.py, docs/loadgen.md)
    ("transport", pa.string()),
    *[(f"chunk_gap_{q}_s", pa.float64()) for q in ("p50", "p90", "p99")],
    ("accept_length_decode", pa.float64()),
    ("accept_length_source", pa.string()),
    ("acceptance_per_position", pa.list_(pa.float64())),
    ("offered_rate_req_s", pa.float64()),
    ("achieved_rate_req_s", pa.float64()),
    ("start_late_s", pa.float64()),
    ("client_dispatch_lag_p99_s", pa.float64()),
    ("loop_lag_p99_s", pa.float64()),
    ("client_cpu_percent", pa.float64()),
    ("merged_reads", pa.int64()),
    ("merged_read_fraction", pa.float64()),
    # why the load stopped issuing (grid/store/stopping.py): count | target | cap | duration |
    # over_saturated, in words, the precision target's half-width reached (relative, the
    # cell's own interval) and the over-saturation evidence (JSON: slope, window, points)
    ("stop_reason", pa.string()),
    ("stop_detail", pa.string()),
    ("stop_half_width", pa.float64()),
    ("stop_evidence", pa.string()),
    # client TTFT minus the server's own (SGLang's native meta_info): the network and the
    # client's reading, per request; p50 / p99 over the cell's completed requests
    ("ttft_minus_server_p50_s", pa.float64()),
    ("ttft_minus_server_p99_s", pa.float64()),
    # workload.kind=conversations: Σ cached_tokens / Σ context_tokens over the completed rounds
    ("cache_hit_rate", pa.float64()),
    # the attempt's manifest (grid/store/checksums.py), written by the commit: JSON
    # {dataset: {"size", "sha256", "mtime_ns"}} of its data files
    ("files", pa.string()),
])

SERVER_METRIC_FIELDS = _schema([
    ("run_id", pa.string()),
    ("cell_id", pa.string()),
    ("attempt", pa.int64()),
    ("scraped_at", pa.float64()),
    ("metric", pa.string()),
    ("labels", pa.string()),
    ("value", pa.float64()),
])
"""Long format: one row per Prometheus sample per scrape (the first scrape is just before the
load, the last just after; counters' deltas between them belong to the cell)."""

TELEMETRY_FIELDS = _schema([
    ("run_id", pa.string()),
    ("cell_id", pa.string()),
    ("attempt", pa.int64()),
    ("node", pa.string()),
    ("gpu", pa.int64()),
    ("sampled_at", pa.float64()),
    ("metric", pa.string()),
    ("value", pa.float64()),
    ("note", pa.string()),
])
"""Long format: one row per GPU per metric per sample (`gpu_util_pct`, `memory_used_mib`,
`power_w`, `sm_clock_mhz`; 1 Hz by default). A node without NVML gives one row per cell with
metric `unavailable`, gpu -1, no value and the reason in `note`."""


TURN_FIELDS = _schema([
    *_CELL_CONTEXT_FIELDS,
    # actors/loadgen/conversation_plan.py ROW_KEYS, in order (docs/agentic.md)
    ("conversation_id", pa.string()),
    ("turn_index", pa.int64()),
    ("num_turns", pa.int64()),
    ("domain", pa.string()),
    ("status", pa.string()),
    ("error", pa.string()),
    ("context_tokens", pa.int64()),
    ("cached_tokens", pa.int64()),
    ("request_chars", pa.int64()),
    ("output_tokens", pa.int64()),
    ("reply_source", pa.string()),
    ("think_time_s", pa.float64()),
    ("scheduled_at", pa.float64()),
    ("sent_at", pa.float64()),
    ("dispatch_lag_s", pa.float64()),
    *_STREAM_FIELDS,
])
"""One row per round of each replayed conversation (workload.kind=conversations). status:
ok | error | skipped (an earlier round failed) | not_run (the load window ended first);
`cached_tokens`: the server's prefix-cache hit for the round's context (`context_tokens`)."""


def with_partitions(fields: pa.Schema) -> pa.Schema:
    """The schema a reader sees: file columns plus the partition columns."""
    return pa.schema(list(fields) + list(PARTITION_SCHEMA))
