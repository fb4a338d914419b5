"""The catalog: every known workload definition, compiled, looked up by apiVersion/kind.

Built-in definitions ship in `catalog/` (inside the wheel as `placer/_data/catalog`);
user directories (`--catalog DIR`) and definitions registered in a cluster are layered on
top, later layers winning for the same apiVersion/kind.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from .definitions import Definition, parse_definition
from .errors import DefinitionError, InputError
from .inputs import decode, load_yaml
from .program import Layout, build_paths_program, build_program, compile_program, layout

COMPANIONS_FILE = "companions.yaml"


@dataclass
class CompiledDefinition:
    definition: Definition
    source: str
    program: Any                                  # the fused jq program
    layout: Layout                                # where the program puts each field
    _paths_program: Any = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def paths_program(self) -> Any:
        """Compiled on first mutation only: most commands never rewrite objects."""
        if self._paths_program is None:
            self._paths_program = compile_program(build_paths_program(self.definition), self.name)
        return self._paths_program


def compile_definition(data: Any, source: str) -> CompiledDefinition:
    defn = parse_definition(data, source)
    return CompiledDefinition(defn, source, compile_program(build_program(defn), defn.name), layout(defn))


@dataclass(frozen=True)
class Catalog:
    by_gvk: Mapping[tuple[str, str], CompiledDefinition]
    # plain supporting kinds that travel with workloads: "Kind" or "group/Kind"
    companion_kinds: frozenset[str]

    @property
    def definitions(self) -> list[CompiledDefinition]:
        seen: dict[int, CompiledDefinition] = {}
        for d in self.by_gvk.values():
            seen.setdefault(id(d), d)
        return sorted(seen.values(), key=lambda d: d.name)

    def lookup(self, api_version: str, kind: str) -> CompiledDefinition | None:
        return self.by_gvk.get((api_version, kind))

    def is_companion(self, api_version: str, kind: str) -> bool:
        group = api_version.rpartition("/")[0]
        return kind in self.companion_kinds or f"{group}/{kind}" in self.companion_kinds

    def with_definitions(self, defs: Iterable[CompiledDefinition]) -> "Catalog":
        """A new catalog where `defs` override existing definitions for their kinds."""
        by_gvk = dict(self.by_gvk)
        for d in defs:
            for m in d.definition.matches:
                by_gvk[(m.apiVersion, m.kind)] = d
        return Catalog(by_gvk, self.companion_kinds)

    def kinds(self) -> list[tuple[str, str]]:
        return sorted(self.by_gvk)


def builtin_catalog_dir() -> Path:
    packaged = resources.files("placer") / "_data" / "catalog"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parent.parent / "catalog"   # a source checkout


def read_yaml_documents(path: Path) -> list[Any]:
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror}", source=str(path)) from None
    return [d for d, _ in load_yaml(decode(raw, str(path)), str(path)) if d is not None]


def load_definition_file(path: Path) -> list[CompiledDefinition]:
    return [compile_definition(doc, str(path)) for doc in read_yaml_documents(path)]


def _definition_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        raise InputError("catalog directory not found", source=str(directory))
    return sorted(p for p in directory.glob("*.y*ml")
                  if p.suffix in (".yaml", ".yml") and p.name != COMPANIONS_FILE)


def _companions(directory: Path) -> set[str]:
    path = directory / COMPANIONS_FILE
    if not path.exists():
        return set()
    kinds: set[str] = set()
    for doc in read_yaml_documents(path):
        if not isinstance(doc, dict) or not isinstance(doc.get("kinds"), list):
            raise DefinitionError("expected a mapping with a list `kinds`", source=str(path))
        kinds.update(str(k) for k in doc["kinds"])
    return kinds


def load_catalog(extra_dirs: Sequence[str | Path] = (), *, builtin: bool = True) -> Catalog:
    dirs = ([builtin_catalog_dir()] if builtin else []) + [Path(d) for d in extra_dirs]
    catalog = Catalog({}, frozenset())
    for directory in dirs:
        defs = [d for path in _definition_files(directory) for d in load_definition_file(path)]
        _reject_duplicates(defs)
        catalog = Catalog(catalog.with_definitions(defs).by_gvk,
                          catalog.companion_kinds | _companions(directory))
    return catalog


def _reject_duplicates(defs: list[CompiledDefinition]) -> None:
    """Two files of one directory claiming the same kind is a mistake, not an override."""
    owner: dict[tuple[str, str], str] = {}
    for d in defs:
        for m in d.definition.matches:
            key = (m.apiVersion, m.kind)
            if key in owner and owner[key] != d.source:
                raise DefinitionError(f"{m.apiVersion}/{m.kind} is also defined in {owner[key]}", source=d.source)
            owner[key] = d.source
