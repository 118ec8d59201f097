"""``python -m engines.sim [SGLang flags] [--sim-* flags]``: the simulated SGLang server."""

import sys

from engines.sim.server import main

sys.exit(main())
