"""`python -m grid.twin results/RUN`: a twin of the server a run measured -- the simulator
fitted to the run's committed cells (docs/twin.md). This package reads the run through
grid.loader and writes `twin.json` beside it; the model and the fit belong to the simulator
(`engines.twin_modeller().fit_twin`: the engine that models servers, the simulator)."""
