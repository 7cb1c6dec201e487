"""Matrix: datasets, runner, result store, response parsers, checker, metrics, reports, CLI."""
