"""`placer catalog`: list the known workload definitions, validate definition files."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.table import Table

from placer.cli.common import CATALOG_HELP, app, err, out, run
from placer.cli.output import OUTPUT_HELP, emit, parse_output
from placer.definitions.catalog import PLACER_FORMAT, load_catalog, validate_path
from placer.model.errors import InputError, PlacerError

PREFER_HELP = ("Which format serves a kind both describe: placer (its own definitions first, Kartas only "
               "for kinds without one, as KAI) or karta.")

catalog_app = typer.Typer(no_args_is_help=True, help="Workload definitions: list, validate, apply.")
app.add_typer(catalog_app, name="catalog")


@catalog_app.command("list")
def list_(catalog: List[str] = typer.Option([], "--catalog", help=CATALOG_HELP),
          output: str = typer.Option("table", "-o", "--output", help=OUTPUT_HELP),
          prefer: str = typer.Option(PLACER_FORMAT, "--prefer", help=PREFER_HELP)) -> None:
    """Every apiVersion/kind placer understands, with the definition, file and format that serve it."""
    def go() -> None:
        fmt = parse_output(output)
        cat = load_catalog(catalog, prefer=prefer)
        rows = [{"apiVersion": api, "kind": kind, "definition": cat.by_gvk[api, kind].name,
                 "source": cat.by_gvk[api, kind].source, "format": cat.by_gvk[api, kind].format}
                for api, kind in cat.kinds()]
        if not fmt.tabular:
            emit(rows, fmt, names=[f"workloaddefinition.placer.dev/{n}"
                                   for n in dict.fromkeys(r["definition"] for r in rows)])
            return
        table = Table("APIVERSION", "KIND", "DEFINITION", "FORMAT", "SOURCE", box=None)
        for r in rows:
            table.add_row(r["apiVersion"], r["kind"], r["definition"], r["format"], r["source"])
        out.print(table)
        out.print(f"companion kinds: {', '.join(sorted(cat.companion_kinds))}")
    run(go)


@catalog_app.command()
def validate(files: List[Path] = typer.Argument(..., help="Definition files (plain or WorkloadDefinition "
                                                    "objects), companions.yaml, or directories of them.")) -> None:
    """Check definition files: schema, and that every jq expression compiles.
    Errors read `file: path.to.field: message`; exit 2 if any file is invalid."""
    def go() -> None:
        failed = 0
        for f in files:
            try:
                for name, holds in validate_path(f):
                    out.print(f"{name}: ok ({holds})", markup=False, highlight=False)
            except PlacerError as e:
                failed += 1
                err.print(f"error: {e}", markup=False, highlight=False)
        if failed:
            raise typer.Exit(2)
    run(go)


@catalog_app.command("apply")
def apply_(files: List[Path] = typer.Argument(None, help="Definition files. Default: the built-in catalog."),
           context: Optional[str] = typer.Option(None, "--context", help="kubeconfig context (default: current)"),
           kubeconfig: Optional[str] = typer.Option(None, "--kubeconfig")) -> None:
    """Register definitions in a cluster as WorkloadDefinition objects (placer.dev), installing
    placer's CRD when missing. Every placer command reading that cluster then uses them."""
    from placer.fleetview.registry import apply_definitions, builtin_definition_files, read_definition_files
    from placer.kube import Kube

    def go() -> None:
        docs = read_definition_files(files or builtin_definition_files())   # all valid, or exit 2
        client = Kube(kubeconfig).client(context)
        for a in apply_definitions(client, docs):
            out.print(f"workloaddefinition.placer.dev/{a.name} applied ({', '.join(a.kinds)}) "
                      f"on {client.cluster}", markup=False, highlight=False)
    run(go)


@catalog_app.command("lint")
def lint_(definitions: List[str] = typer.Argument(..., help="Karta files or directories of them."),
          files: List[str] = typer.Option(..., "-f", "--filename",
                                          help="Sample manifests (file, directory, or - for stdin); repeatable.")
          ) -> None:
    """Evaluate Workload Map (Karta) definitions over real manifests with the real jq and report what
    validation cannot see, one line each naming file, definition and field. Exit 0 clean, 3 findings,
    2 invalid input."""
    from placer.ops.catalog import lint_definitions

    def go() -> None:
        report = lint_definitions(definitions, files)
        for line in report.findings:
            out.print(str(line), markup=False, highlight=False, soft_wrap=True)
        err.print(f"{report.definitions} definitions, {report.samples} samples, {len(report.findings)} findings",
                  markup=False, highlight=False)
        if report.findings:
            raise typer.Exit(3)
    run(go)


@catalog_app.command("export")
def export(kinds: List[str] = typer.Argument(None, help="Kinds (Kind or group/Kind) or definition names. "
                                                      "Default: every built-in definition."),
           format: str = typer.Option(..., "--format", help="karta: run.ai/v1alpha1 Karta (NVIDIA Workload Map)."),
           directory: Optional[str] = typer.Option(None, "-o", "--output-dir",
                                                   help="Write one file per definition here; default: stdout.")
           ) -> None:
    """Write placer's built-in definitions in another format. What the format cannot express is
    approximated and listed in a comment at the top of each file."""
    from placer.ops.catalog import export_kartas, write_exports

    def go() -> None:
        if format != "karta":
            raise InputError(f"--format: {format!r}: expected karta")
        exported = export_kartas(kinds or [])
        if directory is None:
            out.file.write("---\n".join(f.text for f in exported))
            return
        for path in write_exports(exported, directory):
            err.print(f"wrote {path}", markup=False, highlight=False)
    run(go)
