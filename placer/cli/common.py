"""Shared CLI plumbing: the typer app, global flags, error-to-exit-code boundary."""

from __future__ import annotations

import gc
import os
import re
import sys
import traceback
from typing import TYPE_CHECKING, Any, Callable, TypeVar, cast

import typer
import typer.core

from placer.model.errors import InputError, PlacerError
from placer.model.podspec import DEFAULT_GPU_RESOURCES

if TYPE_CHECKING:
    from rich.console import Console


class _Root(typer.core.TyperGroup):
    """The root command group: `--debug` is accepted anywhere on the line (kubectl's global
    flags are), by moving it in front of the subcommand before click parses."""

    def parse_args(self, ctx, args):
        head, sep, tail = (args[:args.index("--")], ["--"], args[args.index("--") + 1:]) if "--" in args \
            else (list(args), [], [])
        if "--debug" in head:
            head = ["--debug"] + [a for a in head if a != "--debug"]
        command = command_name(head)
        if command in VALUED_DRY_RUN:               # kubectl's bare --dry-run means --dry-run=client
            head = ["--dry-run=client" if a == "--dry-run" else a for a in head]
        return super().parse_args(ctx, head + sep + tail)


# commands whose --dry-run takes kubectl's optional value (none|client|server)
VALUED_DRY_RUN = ("submit", "plan")


def command_name(args: list[str]) -> str | None:
    """The subcommand of a command line: its first word that is no option (the root's
    options are all flags), before any `--`."""
    head = args[:args.index("--")] if "--" in args else args
    return next((a for a in head if not a.startswith("-")), None)


app = typer.Typer(cls=_Root, no_args_is_help=True,
                  help="Gang-aware multi-cluster placement of GPU AI workloads on Kubernetes.")


class _OnFirstUse:
    """A rich Console made when first used: a command that prints data (`-o json`) and plain
    error lines never loads rich (issue 24: about 0.02 s CPU of every such `placer plan`)."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._made: Any = None

    def __getattr__(self, name: str) -> Any:
        if self._made is None:
            from rich.console import Console
            self._made = Console(**self._options)
        return getattr(self._made, name)


# Piped output is read by people too (CI logs, less): don't crop it to 80 columns.
out = cast("Console", _OnFirstUse(soft_wrap=True, width=None if sys.stdout.isatty() else 200))
err = cast("Console", _OnFirstUse(stderr=True, soft_wrap=True))

_state = {"debug": False, "own_process": False}   # own_process: run by main(), not called in a host

T = TypeVar("T")


def _print_version(value: bool) -> None:
    if value:
        from placer.model.versions import version_line
        print(version_line())
        raise typer.Exit(0)


@app.callback()
def _root(debug: bool = typer.Option(False, "--debug", help="Show tracebacks on errors (anywhere on the line)."),
          version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                                       help="Print versions and exit.")) -> None:
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


# `placer plan` in its own process runs without the cyclic collector (issue 24). CPython's
# collector walks every tracked object (the imports' ~38,000 and the input's) each time the
# survivors grow enough, and after the imports it freed nothing: 105 collections, 0.06-0.09 s
# CPU of a 1,000-workload plan; 0.7 s of a 4,000-workload one; 327 collections and 4.7 s of
# 10,000 workloads on 100,000 nodes. The peak RSS without it is the same (benchmarks/RESULTS.md: 100, 208 and
# 416-420 MiB); tests/cli/test_one_shot_heap.py: a plan's run leaves it nothing to free. The
# daemon, which runs for days, keeps its own collector (placer.daemon.heap).
WITHOUT_COLLECTOR = ("plan",)


def one_shot_process(command: str | None) -> None:
    """Called by the console script, before the command's imports: the collector off for a
    command of WITHOUT_COLLECTOR (reference counting still frees all but cycles)."""
    if command in WITHOUT_COLLECTOR:
        gc.disable()


def one_shot_heap() -> None:
    """For a one-shot command in placer's own process, once its modules are loaded: they are
    never scanned again (`gc.freeze`) by a collection something asks for, nor written to (so
    copied) by one in a forked child. A host's process (tests calling the app) is left as it
    is: what it froze would stay."""
    if _state["own_process"]:
        gc.freeze()


def main() -> None:
    # run as kubectl's plugin (`kubectl placer ...` execs kubectl-placer): help says so
    plugin = os.path.basename(sys.argv[0] or "") == "kubectl-placer"
    _state["own_process"] = True
    app(prog_name="kubectl placer" if plugin else None)


# --- options and helpers shared by commands ----------------------------------------

FILES_HELP = "File, directory (all .yaml/.yml/.json under it) or - for stdin; repeatable."
CATALOG_HELP = "Extra directory of workload definitions; repeatable, later wins."
GPU_HELP = "Resource name counted as GPUs; repeatable (default nvidia.com/gpu, env PLACER_GPU_RESOURCES)."


_RESOURCE_NAME = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def warn(message: str) -> None:
    """`warning: ...` on stderr, as plain text (names may hold brackets)."""
    err.print(f"warning: {message}", markup=False, highlight=False)


def note(message: str) -> None:
    err.print(f"note: {message}", markup=False, highlight=False)


def gpu_resources(names: list[str] | None) -> tuple[str, ...]:
    if names:
        for name in names:
            if not _RESOURCE_NAME.match(name):
                raise InputError(f"--gpu-resource {name!r}: expected a resource name such as nvidia.com/gpu")
        return tuple(names)
    env = os.environ.get("PLACER_GPU_RESOURCES", "")
    return tuple(n.strip() for n in env.split(",") if n.strip()) or DEFAULT_GPU_RESOURCES
