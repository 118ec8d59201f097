"""A server someone else runs, at a URL: nothing to launch; what it offers is detected."""
