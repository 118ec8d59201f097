"""What a cell attempt leaves (grid/store/rows.py): a conversation cell's prefix-cache hit
rate."""

import pytest

from grid.store.rows import cache_hit_rate


def test_cache_hit_rate_counts_completed_rounds_that_report_it():
    rows = [{"status": "ok", "cached_tokens": 0, "context_tokens": 100},
            {"status": "ok", "cached_tokens": 90, "context_tokens": 120},
            {"status": "error", "cached_tokens": 50, "context_tokens": 50},
            {"status": "ok", "cached_tokens": None, "context_tokens": 500}]
    assert cache_hit_rate(rows) == pytest.approx(90 / 220)
    assert cache_hit_rate([]) is None
