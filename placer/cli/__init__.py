"""The `placer` command line: thin typer commands, one module per command.

Each command parses its options, calls one library function and renders the result.
Errors become exit codes only here: PlacerError subclasses carry their own code
(2 for bad input); anything else is a bug and exits 1 with the traceback under --debug.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, Sequence

from placer.cli import common, ending

# The command modules, each registering itself on `app` when imported, in the order
# `placer --help` lists them.
COMMANDS = ("describe", "catalog", "plan", "clusters", "submit", "daemon", "get", "delete", "version")


def load_commands(names: Sequence[str] = COMMANDS) -> Any:
    """The app with the commands `names` registered (in COMMANDS order); a missing one is an error."""
    for name in COMMANDS:
        if name in names:
            importlib.import_module(f"{__name__}.{name}")
    return common.app


def __getattr__(name: str) -> Any:
    # `from placer.cli import app` (tests, hosts): the app with every command
    if name == "app":
        return load_commands()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    """The console script. Loads the module of the command named on the line only (the
    other commands' imports, rich's tables and trees among them, cost every `placer plan`
    about 0.01 s CPU, issue 24); every command for help, completion or a name it does not
    know (click then lists or suggests them). The process ends at once when the command is
    done (placer.cli.ending), but the daemon's: it ends once after hours, its threads stopping
    (Python's exit waits for them). A host running this in its own process (a probe, a
    benchmark) sees the end through atexit, as at any exit."""
    command = common.command_name(sys.argv[1:])
    common.one_shot_process(command)        # before the command's imports: their collections too
    load_commands((command,) if command in COMMANDS else COMMANDS)
    if command == "daemon":
        common.main()
    else:
        ending.run_then_exit(common.main)
