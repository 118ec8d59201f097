"""The seeded bootstrap the analysis uses: one implementation, in specgrid_metrics/bootstrap.py
(the load generator's precision check uses it too, and actors/ cannot import grid); re-exported
here for the analysis and the report."""

from specgrid_metrics.bootstrap import (
    DEFAULT_REPLICATES,
    LEVEL,
    Resample,
    excludes_zero,
    interval,
    seed_for,
)

__all__ = ["DEFAULT_REPLICATES", "LEVEL", "Resample", "excludes_zero", "interval", "seed_for"]
