"""Pure analysis of a run's results (numpy/pandas, no Ray, no files): steady-state windows,
seeded bootstrap intervals, goodput, speedup against load, crossover and the recommended
speculation threshold; for the operator, the Pareto frontier of throughput per user against per
GPU with the cost per million tokens (pareto.py) and capacity under the SLOs (capacity.py)."""

from grid.analysis.cellstats import CellStats, analyse_cells
from grid.analysis.decision import Decision, decide
from grid.analysis.goodput import Slo

__all__ = ["CellStats", "Decision", "Slo", "analyse_cells", "decide"]
