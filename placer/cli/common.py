"""Shared CLI plumbing: the typer app, global flags, error-to-exit-code boundary."""

from __future__ import annotations

import os
import sys
import traceback
from typing import Callable, TypeVar

import typer
from rich.console import Console

from ..errors import PlacerError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Gang-aware multi-cluster placement of GPU AI workloads on Kubernetes.")
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

_state = {"debug": False}

T = TypeVar("T")


@app.callback()
def _root(debug: bool = typer.Option(False, "--debug", help="Show tracebacks on errors.")) -> None:
    _state["debug"] = debug or bool(os.environ.get("PLACER_DEBUG"))


def run(fn: Callable[[], T]) -> T:
    """Call fn; turn placer errors into one line on stderr and their exit code."""
    try:
        return fn()
    except PlacerError as e:
        if _state["debug"]:
            traceback.print_exc()
        print(f"error: {e}", file=sys.stderr)
        raise typer.Exit(e.exit_code)
    except KeyboardInterrupt:
        raise typer.Exit(130)


def main() -> None:
    app()
