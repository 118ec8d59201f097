"""One surface, every drafter (docs/questions.md): the node's relative step cost c(B, k),
measured once with the acceptance forced (cost.py), and a drafter's per-position acceptance
profile (profile.py), which together predict the drafter's speedup at every (load, depth), the
break-even accept length and the best depth per load (predict.py). Pure: numpy and pandas."""

from grid.analysis.surface.cost import (
    Cost,
    Decomposition,
    ForcedPoint,
    LengthCheck,
    Throughput,
    beside_leviathan,
    decompose,
    forced_points,
    interpolated,
    length_checks,
    leviathan_speedup,
    step_cost,
    surface,
    widened,
)
from grid.analysis.surface.predict import (
    Prediction,
    Schedule,
    best_depths,
    depth_plan,
    depth_schedule,
    plausible_depths,
    predict,
    schedule_text,
)
from grid.analysis.surface.profile import (
    FORMAT,
    DomainProfile,
    Profile,
    accept_length,
    acceptance_rate,
    accepted_per_step,
    check,
    conditional_of,
    histogram_counts,
    marginal_of,
    profile_from_cells,
    profile_from_counts,
    profile_from_requests,
    profile_text,
    read_profile,
)

__all__ = [
    "FORMAT", "Cost", "Decomposition", "DomainProfile", "ForcedPoint", "LengthCheck",
    "Prediction", "Profile", "Schedule", "Throughput", "accept_length", "accepted_per_step",
    "acceptance_rate",
    "beside_leviathan", "best_depths", "check", "conditional_of", "decompose", "depth_plan",
    "depth_schedule", "forced_points", "histogram_counts", "interpolated", "length_checks",
    "leviathan_speedup", "marginal_of", "plausible_depths", "predict", "profile_from_cells",
    "profile_from_counts", "profile_from_requests", "read_profile", "step_cost", "surface",
    "profile_text", "schedule_text", "widened",
]
