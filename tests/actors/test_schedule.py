"""Open-loop schedules and client splitting as pure functions (actors/loadgen/schedule.py)."""

from __future__ import annotations

import itertools
import statistics

import pytest

from actors.loadgen import schedule as s
from actors.loadgen.spec import LoadSpec, Prompt, share


def schedule(n: int, rate: float, arrival: str = "poisson", burstiness: float = 1.0,
             seed: int = 0) -> list[float]:
    """The first n arrival offsets."""
    return list(itertools.islice(s.arrival_offsets(rate, arrival, burstiness, seed), n))


def _gaps(offsets: list[float]) -> list[float]:
    return [b - a for a, b in itertools.pairwise(offsets)]


def test_poisson_mean_rate_and_cv() -> None:
    offs = schedule(20_001, rate=50.0, arrival="poisson", seed=3)
    assert offs[0] == 0.0
    assert all(b >= a for a, b in itertools.pairwise(offs))
    g = _gaps(offs)
    assert 1 / statistics.fmean(g) == pytest.approx(50.0, rel=0.03)
    assert statistics.stdev(g) / statistics.fmean(g) == pytest.approx(1.0, rel=0.05)


@pytest.mark.parametrize("burstiness", [0.25, 1.0, 4.0])
def test_gamma_burstiness_sets_cv(burstiness: float) -> None:
    g = _gaps(schedule(20_001, rate=10.0, arrival="gamma", burstiness=burstiness, seed=1))
    assert 1 / statistics.fmean(g) == pytest.approx(10.0, rel=0.05)
    cv = statistics.stdev(g) / statistics.fmean(g)
    assert cv == pytest.approx(1 / burstiness**0.5, rel=0.08)


def test_constant_schedule_is_exact_and_absolute() -> None:
    offs = schedule(5, rate=4.0, arrival="constant")
    assert offs == pytest.approx([0.0, 0.25, 0.5, 0.75, 1.0])


def test_schedules_are_seeded() -> None:
    assert schedule(50, 5.0, seed=7) == schedule(50, 5.0, seed=7)
    assert schedule(50, 5.0, seed=7) != schedule(50, 5.0, seed=8)
    assert s.prompt_order(20, 1) == s.prompt_order(20, 1)
    assert sorted(s.prompt_order(20, 1)) == list(range(20))
    assert s.prompt_order(20, 1) != s.prompt_order(20, 2)


def test_bad_schedule_arguments() -> None:
    with pytest.raises(ValueError):
        schedule(3, rate=0.0)
    with pytest.raises(ValueError):
        schedule(3, rate=1.0, arrival="weibull")
    with pytest.raises(ValueError):
        list(itertools.islice(s.assignment([0, 0]), 1))


@pytest.mark.parametrize("weights", [[1], [1, 1, 1], [3, 2, 2], [5, 0, 1], [1, 1, 1, 1, 1, 1, 1]])
@pytest.mark.parametrize("total", [0, 1, 7, 100, 101])
def test_client_indices_partition(weights: list[int], total: int) -> None:
    parts = [list(s.client_indices(total, weights, j)) for j in range(len(weights))]
    flat = sorted(i for p in parts for i in p)
    assert flat == list(range(total))  # disjoint, and the union is the one-client plan
    for j, p in enumerate(parts):
        assert p == sorted(p)
        # proportional to weight within one unit per client
        assert abs(len(p) - total * weights[j] / sum(weights)) <= 1


def test_client_indices_endless() -> None:
    got = list(itertools.islice(s.client_indices(None, [1, 1], 1), 4))
    assert got == [1, 3, 5, 7]


def test_client_arrivals_union_is_the_cell_schedule() -> None:
    full = schedule(60, rate=20.0, arrival="gamma", burstiness=0.5, seed=4)
    got: dict[int, float] = {}
    for j in range(3):
        for n, off in s.client_arrivals(60, [1, 1, 1], j, 20.0, "gamma", 0.5, 4):
            assert n not in got
            got[n] = off
    assert [got[n] for n in range(60)] == full
    horizon = list(s.client_arrivals(None, [1], 0, 20.0, "constant", horizon_s=1.0))
    assert len(horizon) == 20 and horizon[-1][1] < 1.0


def test_loadspec_shares_and_validation() -> None:
    prompts = (Prompt("a", "x", "d"),)
    assert [share(10, 4, i) for i in range(4)] == [3, 3, 2, 2]
    sp = LoadSpec(url="http://h", prompts=prompts, concurrency=10, num_clients=4, client_index=1)
    assert sp.my_concurrency == 3 and sp.closed_loop
    sp = LoadSpec(url="http://h", prompts=prompts, rate=8.0, num_clients=4, client_index=3)
    assert sp.my_rate == 2.0 and sp.my_concurrency is None
    assert LoadSpec(url="http://h", prompts=prompts).my_concurrency == 1
    for bad in (
        {"endpoint": "completions"}, {"arrival": "uniform"}, {"concurrency": 0},
        {"rate": -1.0}, {"num_requests": None}, {"client_index": 2, "num_clients": 2},
        {"rate": 5.0, "concurrency": 1, "num_clients": 2}, {"url": "127.0.0.1:80"},
        {"transport": "curl"}, {"burstiness": 0.0},
    ):
        with pytest.raises(ValueError):
            LoadSpec(**{"url": "http://h", "prompts": prompts, **bad})  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        LoadSpec(url="http://h", prompts=())


def test_the_longest_wait_of_a_cells_schedule() -> None:
    mk = lambda **kw: LoadSpec(url="http://x", prompts=(Prompt("p", "t", "coding"),), **kw)  # noqa: E731
    assert mk(concurrency=4, num_requests=8).longest_wait_s() == 0.0  # closed loop: none
    # constant arrivals at 2/s: one every 0.5 s, whatever the client's share
    assert mk(rate=2.0, arrival="constant", num_requests=10, num_clients=2,
              client_index=1).longest_wait_s() == 0.5
    # a seeded Poisson schedule: its widest gap among the 50 arrivals (every client's)
    offs = schedule(50, rate=5.0, arrival="poisson", seed=7)
    widest = max(_gaps(offs))
    assert mk(rate=5.0, num_requests=50, seed=7).longest_wait_s() == widest
    assert widest > 1 / 5.0  # wider than the mean gap, as a Poisson schedule's widest is
    # a duration bound stops the schedule there: arrivals at 0, 1, 2 (< 2.5 s), gaps of 1 s
    assert mk(rate=1.0, arrival="constant", num_requests=None, duration_s=2.5
              ).longest_wait_s() == 1.0
    assert s.longest_gap([]) == s.longest_gap([3.0]) == 0.0
