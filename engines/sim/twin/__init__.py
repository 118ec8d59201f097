"""A twin of a measured server: the simulator fitted to a run's cells (docs/twin.md). This is
the twin's one package: the closed-form model, the fit, the document and its printout, all pure
functions of plain values (engines/twin_data.py `MeasuredCell`). Reading a run folder and the
command line that writes `twin.json` are the driver's (grid/twin.py, `python -m grid.twin`)."""
