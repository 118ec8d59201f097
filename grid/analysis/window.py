"""A cell's steady-state window: one implementation, in specgrid_metrics/window.py (the load
generator's precision check reads the same window); re-exported here for the analysis."""

from specgrid_metrics.window import Window, ended_inside, inside, steady_window, tokens_in_window

__all__ = ["Window", "ended_inside", "inside", "steady_window", "tokens_in_window"]
