"""`placer catalog lint` and `placer catalog export`: Workload Map (Karta) definitions
checked against real manifests, and placer's own definitions written as Kartas."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import yaml

from placer.definitions.catalog import PLACER_FORMAT, definition_files, list_items, load_catalog, read_yaml_documents
from placer.definitions.karta import is_karta, parse_karta
from placer.definitions.karta.export import export_definition, header
from placer.definitions.karta.lint import lint
from placer.inputs.manifests import read_documents
from placer.model.errors import InputError


@dataclass(frozen=True)
class LintLine:
    file: str
    definition: str
    field: str
    message: str
    sample: str
    more: int = 0                             # further samples with the same finding

    def __str__(self) -> str:
        also = f", and {self.more} more" if self.more else ""
        on = f" (sample {self.sample}{also})" if self.sample else ""
        return f"{self.file}: karta {self.definition}: {self.field}: {self.message}{on}"


@dataclass(frozen=True)
class LintReport:
    definitions: int                          # Kartas linted
    samples: int                              # manifests read
    findings: tuple[LintLine, ...]


def _definition_files(paths: Sequence[str]) -> list[Path]:
    files: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            files += definition_files(p)
        elif p.exists():
            files.append(p)
        else:
            raise InputError("no such file or directory", source=str(p))
    return files


def lint_definitions(definitions: Sequence[str], samples: Sequence[str]) -> LintReport:
    """Every Karta in `definitions` (files or directories) over the manifests in `samples`.
    An invalid definition, or a file holding no Karta, raises InputError (exit 2) before
    anything is evaluated."""
    kartas = []
    for path in _definition_files(definitions):
        docs = list_items(read_yaml_documents(path))
        found = [parse_karta(d, str(path)) for d in docs if is_karta(d)]
        if not found:
            raise InputError("no run.ai/v1alpha1 Karta in this file: lint reads Workload Map definitions",
                             source=str(path))
        kartas += [(str(path), k) for k in found]
    manifests = [(d.where, d.obj) for d in read_documents(list(samples))]
    seen: dict[tuple[str, str, str, str], LintLine] = {}
    for source, karta in kartas:
        for f in lint(karta, manifests):
            key = (source, karta.metadata.name, f.field, f.message)
            first = seen.get(key)
            seen[key] = (LintLine(*key, f.sample) if first is None
                         else LintLine(*key, first.sample, first.more + (f.sample != first.sample)))
    return LintReport(len(kartas), len(manifests), tuple(seen.values()))


@dataclass(frozen=True)
class ExportedFile:
    name: str                                 # file name: <definition>.yaml
    definition: str                           # placer definition exported
    kartas: tuple[str, ...]                   # metadata.name of each Karta in it
    text: str                                 # the header comment, then the Karta documents


class _Literal(yaml.SafeDumper):
    """Multi-line jq as YAML block scalars, as a person would write them."""


def _str(dumper: yaml.SafeDumper, value: str) -> Any:
    if "\n" in value:
        text = "\n".join(line.rstrip() for line in value.split("\n"))
        return dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Literal.add_representer(str, _str)


def export_kartas(kinds: Sequence[str] = ()) -> list[ExportedFile]:
    """placer's built-in definitions (all, or those serving one of `kinds`: a kind, as
    `Kind` or `group/Kind`, or a definition name) as Karta files."""
    catalog = load_catalog()
    defs = {d.name: d for d in catalog.by_gvk.values() if d.format == PLACER_FORMAT}
    wanted = {k.lower() for k in kinds}
    chosen = [d for name, d in sorted(defs.items())
              if not wanted or name in wanted or any(_names_kind(m.apiVersion, m.kind, wanted)
                                                     for m in d.definition.matches)]
    unknown = [k for k in kinds if not any(k.lower() == d.name or any(
        _names_kind(m.apiVersion, m.kind, {k.lower()}) for m in d.definition.matches) for d in defs.values())]
    if unknown:
        raise InputError(f"KIND: {', '.join(unknown)}: no built-in definition serves it "
                         f"(known: {', '.join(sorted({m.kind for d in defs.values() for m in d.definition.matches}))})")
    out = []
    for d in chosen:
        exports = export_definition(d.definition)
        notes = tuple(dict.fromkeys(a for e in exports for a in e.approximations))
        text = header(exports[0].__class__(exports[0].name, exports[0].document, notes), f"catalog/{d.name}.yaml")
        body = "---\n".join(yaml.dump(e.document, Dumper=_Literal, sort_keys=False, width=100) for e in exports)
        out.append(ExportedFile(f"{d.name}.yaml", d.name, tuple(e.name for e in exports), text + body))
    return out


def _names_kind(api_version: str, kind: str, wanted: set[str]) -> bool:
    group = api_version.rpartition("/")[0]
    return kind.lower() in wanted or f"{group}/{kind}".lower() in wanted


def write_exports(files: Sequence[ExportedFile], directory: str) -> list[str]:
    """Each file into `directory` (created); the paths written."""
    out = Path(directory)
    try:
        out.mkdir(parents=True, exist_ok=True)
        for f in files:
            (out / f.name).write_text(f.text)
    except OSError as e:
        raise InputError(f"cannot write: {e.strerror}", source=str(out)) from None
    return [str(out / f.name) for f in files]
