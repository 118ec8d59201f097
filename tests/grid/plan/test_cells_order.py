"""Server groups of a grid with repeats: a fresh server per repeat of a configuration, the
configurations' order reversed every other repeat (grid/plan/cells.py `group_by_server`)."""

from __future__ import annotations

from grid.plan.cells import group_by_server, make_cell, one_per_server
from tests.grid.plan.test_cells import _config


def _cell(variant: str, concurrency: int, repeat: int):
    config = _config(variant=variant, concurrency=concurrency,
                     args={"v": variant})  # distinct args: a distinct server per variant
    config["load"]["repeat"] = repeat
    return make_cell({"variant": variant, "concurrency": concurrency, "repeat": repeat},
                     config, "d")


def test_three_variants_three_repeats_alternate():
    # Grid order: repeat outermost, then variant, then load (1, 4).
    cells = [_cell(v, c, r) for r in (0, 1, 2) for v in ("a", "b", "c") for c in (1, 4)]
    groups = group_by_server(cells)
    # Worked by hand: repeat 0 A B C, repeat 1 C B A, repeat 2 A B C; 9 server starts.
    assert [(g.repeat, g.variant) for g in groups] == [
        (0, "a"), (0, "b"), (0, "c"), (1, "c"), (1, "b"), (1, "a"), (2, "a"), (2, "b"),
        (2, "c")]
    assert all([c.concurrency for c in g.cells] == [1, 4] for g in groups)
    assert all({c.repeat for c in g.cells} == {g.repeat} for g in groups)
    assert len({g.key for g in groups}) == 9 and len({g.server_key for g in groups}) == 3
    assert [g.label for g in groups[:4]] == ["a repeat 0", "b repeat 0", "c repeat 0",
                                             "c repeat 1"]
    assert [g.variant for g in one_per_server(groups)] == ["a", "b", "c"]


def test_the_order_holds_whatever_axis_comes_first():
    # Variant outermost: a r0, a r1, b r0, b r1 -> repeat 0: a b; repeat 1: b a.
    cells = [_cell(v, 4, r) for v in ("a", "b") for r in (0, 1)]
    assert [(g.repeat, g.variant) for g in group_by_server(cells)] == [
        (0, "a"), (0, "b"), (1, "b"), (1, "a")]


def test_a_resumed_repeat_keeps_its_direction():
    # Only repeats 1 and 2 left to run: repeat 1 is still reversed, repeat 2 forward.
    cells = [_cell(v, 4, r) for r in (1, 2) for v in ("a", "b")]
    assert [(g.repeat, g.variant) for g in group_by_server(cells)] == [
        (1, "b"), (1, "a"), (2, "a"), (2, "b")]


def test_without_repeats_one_group_per_server_unlabelled():
    cells = [_cell(v, c, 0) for v in ("a", "b") for c in (1, 4)]
    groups = group_by_server(cells)
    assert [(g.variant, len(g.cells), g.label) for g in groups] == [("a", 2, "a"),
                                                                    ("b", 2, "b")]


def test_start_seeds_differ_per_repeat_and_server_and_hold_across_calls():
    cells = [_cell(v, 4, r) for r in (0, 1) for v in ("a", "b")]
    seeds = [g.start_seed for g in group_by_server(cells)]
    assert len(set(seeds)) == 4
    assert seeds == [g.start_seed for g in group_by_server(cells)]
