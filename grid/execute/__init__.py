"""Execution on Ray: the cluster (start or join), the controller (server groups, their cells,
failure isolation, one ray.wait loop), a cell's server (launched or external) and live progress."""
