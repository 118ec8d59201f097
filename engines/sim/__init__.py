"""specgrid-sim: a simulated SGLang server (``python -m engines.sim [SGLang flags] [--sim-*]``).

A real HTTP process speaking SGLang 0.5.23's API (native /generate, OpenAI-compatible
endpoints, /server_info, /metrics ...) whose timing and speculative acceptance come from a
performance model calibrated to a published 8-GPU measurement. Every response is marked as a
simulation (``"simulated": true``, ``engine: "specgrid-sim"``, version ``0.5.23-sim``).

Modules: cli (flags), profile + profiles/*.json (calibration and its sources), model (pure
performance model), adaptive (SGLang's adaptive speculation), scheduler (continuous batching),
engine (requests), wire (SSE bytes), api + server (HTTP), metrics (Prometheus), text
(pseudo-text), calibrate (offline fit: ``python -m engines.sim.calibrate``).
"""
