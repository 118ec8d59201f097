"""The command line: Hydra's flags plus --resume (flags), and run.json, the overrides a run folder
was started with (runrecord)."""
