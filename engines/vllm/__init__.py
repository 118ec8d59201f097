"""vLLM: command lines from variants (command), vLLM's own parser (validate), start-up log
phases (logphases), and the engine interface over them (engine)."""
