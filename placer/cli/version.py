"""`placer version`: placer's, OR-Tools' and jq's versions (also `placer --version`)."""

from __future__ import annotations

import typer

from placer.cli.common import app, out, run
from placer.cli.output import emit, parse_output
from placer.model.versions import version_line, versions


@app.command()
def version(output: str = typer.Option("table", "-o", "--output", help="table, json or yaml")) -> None:
    """Print placer's version and those of OR-Tools and jq it runs on."""
    fmt = run(lambda: parse_output(output, ("table", "json", "yaml")))
    if fmt.tabular:
        out.print(version_line(), markup=False, highlight=False)
    else:
        emit(versions(), fmt)
