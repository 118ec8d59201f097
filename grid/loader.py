"""The public face of specgrid's results: read a run folder's committed attempts with the
explicit schema (grid/store/loader.py does the reading). Notebooks, the report and users import
from here; everything else under grid/store/ is private to the driver."""

from grid.store.loader import (
    dataset_files,
    load_cells,
    load_requests,
    load_server_metrics,
    load_telemetry,
    load_turns,
    sql,
)

__all__ = ["dataset_files", "load_cells", "load_requests", "load_server_metrics",
           "load_telemetry", "load_turns", "sql"]
