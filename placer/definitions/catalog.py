"""The catalog: every known workload definition, compiled, looked up by apiVersion/kind.

Built-in definitions ship in `catalog/` (inside the wheel as `placer/_data/catalog`);
user directories (`--catalog DIR`) and definitions registered in a cluster are layered on
top, later layers winning for the same apiVersion/kind. Workload Map (`Karta`) definitions
may sit beside them; as in KAI, a Karta serves only the kinds no placer definition serves,
unless the caller prefers Kartas (`prefer="karta"`).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from placer.definitions.karta import FORMAT as KARTA_FORMAT
from placer.definitions.karta import is_karta
from placer.definitions.program import (
    Layout,
    build_paths_program,
    build_program,
    compile_checked,
    compile_program,
    layout,
)
from placer.definitions.spec import Definition, from_document
from placer.model.documents import decode, load_yaml
from placer.model.errors import DefinitionError, InputError

COMPANIONS_FILE = "companions.yaml"
PLACER_FORMAT = "placer"
PREFERENCES = (PLACER_FORMAT, KARTA_FORMAT)


@dataclass
class CompiledDefinition:
    definition: Definition
    source: str
    _program: Any                                 # the fused jq program; None: compiled on first use
    layout: Layout                                # where the program puts each field
    _paths_program: Any = field(default=None, repr=False)
    format: str = PLACER_FORMAT                   # what the source document was: placer or karta
    gang_check: str | None = None                 # Karta: jq naming the gang keys it cannot predict

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def program(self) -> Any:
        """The fused jq program. A built-in definition's is compiled when its kind is first
        interpreted, from the plain fused text: its expressions were checked when placer was
        tested (tests/definitions), and a command that reads two kinds compiles two."""
        if self._program is None:
            self._program = compile_program(build_program(self.definition), self.name)
        return self._program

    @property
    def paths_program(self) -> Any:
        """Compiled on first mutation only: most commands never rewrite objects."""
        if self._paths_program is None:
            self._paths_program = compile_program(build_paths_program(self.definition), self.name)
        return self._paths_program


def compile_definition(data: Any, source: str, format: str = PLACER_FORMAT, *,
                       built_in: bool = False) -> CompiledDefinition:
    """A definition, validated, its expressions checked and its program compiled in one jq
    compile. A built-in one (`built_in`, placer's own catalog, which its tests validate and
    check: tests/definitions) is read as it stands, and compiled on first use: a command
    of built-in kinds loads no schema (issue 24)."""
    if built_in:
        defn = from_document(data)
        return CompiledDefinition(defn, source, None, layout(defn), format=format)
    from placer.definitions.schema import parse_definition  # pydantic's models: for user input only

    defn = parse_definition(data, source, check=False)
    return CompiledDefinition(defn, source, compile_checked(defn, source), layout(defn), format=format)


@dataclass(frozen=True)
class Catalog:
    by_gvk: Mapping[tuple[str, str], CompiledDefinition]
    # plain supporting kinds that travel with workloads: "Kind" or "group/Kind"
    companion_kinds: frozenset[str]

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

    def with_fallbacks(self, defs: Iterable[CompiledDefinition]) -> "Catalog":
        """A new catalog where `defs` serve only the kinds it has no definition for (KAI's
        rule for Kartas: a type's own definition first, a Karta for the long tail); the
        first of `defs` to claim a kind wins it."""
        by_gvk = dict(self.by_gvk)
        for d in defs:
            for m in d.definition.matches:
                by_gvk.setdefault((m.apiVersion, m.kind), d)
        return Catalog(by_gvk, self.companion_kinds)

    def kinds(self) -> list[tuple[str, str]]:
        return sorted(self.by_gvk)


def builtin_catalog_dir() -> Path:
    packaged = resources.files("placer") / "_data" / "catalog"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[2] / "catalog"   # a source checkout


def read_yaml_documents(path: Path) -> list[Any]:
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror}", source=str(path)) from None
    return [d for d, _ in load_yaml(decode(raw, str(path)), str(path)) if d is not None]


WRAPPER_API_GROUP = "placer.dev"
WRAPPER_KIND = "WorkloadDefinition"


def unwrap(doc: Any, source: str) -> tuple[Any, str]:
    """A definition document, given plainly or as the `WorkloadDefinition` object that
    `kubectl apply` registers (its `spec`, named after `metadata.name` when the spec has no
    name), and the prefix of its fields in errors."""
    if not (isinstance(doc, dict) and doc.get("kind") == WRAPPER_KIND):
        return doc, ""
    api = str(doc.get("apiVersion") or "")
    if api.partition("/")[0] != WRAPPER_API_GROUP:
        raise DefinitionError(f"apiVersion: {api!r}: a {WRAPPER_KIND} is {WRAPPER_API_GROUP}/v1alpha1", source=source)
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        raise DefinitionError("spec: a WorkloadDefinition carries its definition in spec", source=source)
    name = (doc.get("metadata") or {}).get("name")
    if name and spec.get("name") and spec["name"] != name:
        raise DefinitionError(f"spec.name: {spec['name']!r} differs from metadata.name {name!r}", source=source)
    return ({**spec, "name": spec.get("name") or name}, "spec.")


def compile_document(doc: Any, source: str, *, built_in: bool = False) -> CompiledDefinition:
    """A definition document or WorkloadDefinition object; errors name `spec.<field>` for
    the latter, so they point at the user's own text. A Karta is read as the placer
    definition it stands for."""
    if is_karta(doc):
        from placer.definitions.karta.load import karta_definition  # the schema loads with the first Karta

        translated = karta_definition(doc, source)
        compiled = compile_definition(translated.document, source, KARTA_FORMAT, built_in=built_in)
        compiled.gang_check = translated.gang_check
        return compiled
    doc, prefix = unwrap(doc, source)
    try:
        return compile_definition(doc, source, built_in=built_in)
    except DefinitionError as e:
        if not prefix:
            raise
        raise DefinitionError(prefix + e.message, source=e.source) from None


def list_items(docs: Iterable[Any]) -> list[Any]:
    """Documents with every `kind: List` (as `kubectl get -o yaml` prints) replaced by its items."""
    out: list[Any] = []
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            out += [d for d in doc["items"] if d is not None]
        else:
            out.append(doc)
    return out


def load_definition_file(path: Path, *, built_in: bool = False) -> list[CompiledDefinition]:
    return [compile_document(doc, str(path), built_in=built_in) for doc in list_items(read_yaml_documents(path))]


def is_companions_file(path: Path) -> bool:
    return path.name == COMPANIONS_FILE


def companion_kinds(path: Path) -> set[str]:
    """The kinds a companions file lists: `kinds: [Kind | group/Kind, ...]`."""
    kinds: set[str] = set()
    for doc in read_yaml_documents(path):
        if not isinstance(doc, dict) or not isinstance(doc.get("kinds"), list) or set(doc) != {"kinds"}:
            raise DefinitionError("expected a mapping with one field, a list `kinds`", source=str(path))
        for i, k in enumerate(doc["kinds"]):
            if not isinstance(k, str) or not k or k.count("/") > 1 or not k.rpartition("/")[2][:1].isupper():
                raise DefinitionError(f"kinds[{i}]: {k!r}: expected Kind or group/Kind", source=str(path))
        kinds.update(doc["kinds"])
    return kinds


def validate_path(path: Path) -> list[tuple[str, str]]:
    """`placer catalog validate`: a definition file (plain or WorkloadDefinition objects), a
    companions file, or a directory (each of its files, then the directory as a catalog:
    no two files claiming one kind). (file, what it holds) per file; the first invalid
    file raises, naming file and field."""
    if path.is_dir():
        files = sorted(p for p in path.glob("*.y*ml") if p.suffix in (".yaml", ".yml"))
        if not files:
            raise InputError("no .yaml or .yml files in directory", source=str(path))
        out = [r for f in files for r in validate_path(f)]
        _reject_duplicates([d for f in files if not is_companions_file(f) for d in load_definition_file(f)])
        return out
    if not path.exists():
        raise InputError("no such file or directory", source=str(path))
    if is_companions_file(path):
        return [(str(path), f"companion kinds: {len(companion_kinds(path))}")]
    defs = load_definition_file(path)
    return [(str(path), ", ".join(d.name for d in defs) or "no definitions")]


def definition_files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        raise InputError("catalog directory not found", source=str(directory))
    return sorted(p for p in directory.glob("*.y*ml")
                  if p.suffix in (".yaml", ".yml") and p.name != COMPANIONS_FILE)


def _companions(directory: Path) -> set[str]:
    path = directory / COMPANIONS_FILE
    return companion_kinds(path) if path.exists() else set()


def load_catalog(extra_dirs: Sequence[str | Path] = (), *, builtin: bool = True,
                 prefer: str = PLACER_FORMAT) -> Catalog:
    """Built-ins, then each directory; Kartas (from any directory, later winning) serve the
    kinds left without a placer definition, or every kind they claim with `prefer="karta"`."""
    if prefer not in PREFERENCES:
        raise InputError(f"prefer: {prefer!r}: expected one of {', '.join(PREFERENCES)}")
    dirs = ([builtin_catalog_dir()] if builtin else []) + [Path(d) for d in extra_dirs]
    catalog, kartas = Catalog({}, frozenset()), Catalog({}, frozenset())
    for n, directory in enumerate(dirs):
        defs = directory_definitions(directory, built_in=builtin and n == 0)
        kartas = kartas.with_definitions(d for d in defs if d.format == KARTA_FORMAT)
        catalog = Catalog(catalog.with_definitions(d for d in defs if d.format != KARTA_FORMAT).by_gvk,
                          catalog.companion_kinds | _companions(directory))
    first, then = (catalog, kartas) if prefer == PLACER_FORMAT else (kartas, catalog)
    return Catalog({**then.by_gvk, **first.by_gvk}, catalog.companion_kinds)


_LAYERS: dict[tuple[Any, ...], list[CompiledDefinition]] = {}


def directory_definitions(directory: Path, *, built_in: bool = False) -> list[CompiledDefinition]:
    """A directory's definitions, compiled once per process while its files' contents are
    unchanged (a command that loads the catalog twice, as describe does for its JSON, pays
    once; reading and hashing the files costs far less than compiling them). `built_in`:
    placer's own catalog, whose programs compile on first use (`CompiledDefinition.program`)."""
    files = definition_files(directory)
    key = (str(directory.resolve()), built_in, *((str(p), _digest(p)) for p in files))
    found = _LAYERS.get(key)
    if found is None:
        found = [d for path in files for d in load_definition_file(path, built_in=built_in)]
        _reject_duplicates(found)
        if len(_LAYERS) > 64:                 # a long-lived process re-reading changing directories
            _LAYERS.clear()
        _LAYERS[key] = found
    return list(found)


def _digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""                             # unreadable: load_definition_file reports it


def _reject_duplicates(defs: list[CompiledDefinition]) -> None:
    """Two files of one directory claiming the same kind is a mistake, not an override."""
    owner: dict[tuple[str, str], str] = {}
    for d in defs:
        for m in d.definition.matches:
            key = (m.apiVersion, m.kind)
            if key in owner and owner[key] != d.source:
                raise DefinitionError(f"{m.apiVersion}/{m.kind} is also defined in {owner[key]}", source=d.source)
            owner[key] = d.source
