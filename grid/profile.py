"""`python -m grid.profile RESULTS/RUN_ID > profile.json`: the run's drafter's acceptance
profile (docs/questions.md "The drafter's profile"): per prompt domain, the per-position
acceptance of its done, unforced speculative cells, from their requests' acceptance
histograms (else the engine's per-position counter), with bootstrap intervals and replicates.
`grid.search.profile=profile.json` predicts that drafter on any run's surface (or give the run
folder itself)."""

from __future__ import annotations

import sys
from pathlib import Path

from grid.analysis.surface import profile_text
from grid.questions.speculation.read import run_profile

USAGE = "usage: python -m grid.profile RESULTS/RUN_ID > profile.json"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args in (["-h"], ["--help"]):
        print(f"{USAGE}\n\n{__doc__}")
        return 0
    if len(args) != 1 or args[0].startswith("-"):
        print(f"specgrid: error: {USAGE}", file=sys.stderr)
        return 2
    try:
        profile = run_profile(Path(args[0]))
    except (OSError, ValueError) as e:
        print(f"specgrid: error: {e}", file=sys.stderr)
        return 2
    if profile is None:
        print(f"specgrid: error: {args[0]}: no done, unforced speculative cell with acceptance "
              "recorded: no profile", file=sys.stderr)
        return 2
    sys.stdout.write(profile_text(profile))
    return 0


if __name__ == "__main__":
    sys.exit(main())
