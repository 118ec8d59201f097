"""Planning, before anything starts: overrides -> grid axes, the config schema, cells and their
ids, each cell's server and load specs, workloads, placement, the checks and the estimate, and
the plan that holds them (build). Pure: no Ray, no sockets, nothing written."""
