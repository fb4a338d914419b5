"""The `placer` command line: thin typer commands, one module per command.

Each command parses its options, calls one library function and renders the result.
Errors become exit codes only here: PlacerError subclasses carry their own code
(2 for bad input); anything else is a bug and exits 1 with the traceback under --debug.
"""

from __future__ import annotations

import importlib

from placer.cli.common import app, main  # noqa: F401

# Command modules register themselves on `app` when imported; a missing one is an error.
for _name in ("describe", "catalog", "plan", "clusters", "submit", "daemon", "get", "delete", "version"):
    importlib.import_module(f"{__name__}.{_name}")
