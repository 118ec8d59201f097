"""The results store: the rows a cell attempt leaves (rows, clientstats, provenance), the
ledger, atomic per-attempt commits (results, record), the Arrow schemas and the reader (loader,
public as grid.loader)."""
