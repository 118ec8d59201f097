"""A twin of a measured server: the simulator fitted to a run's cells (docs/twin.md)."""
