"""Reading what users hand placer: files, directories, stdin; multi-document YAML or JSON.

`-f DIR` takes every .yaml/.yml/.json file under it, recursively, in sorted order;
`-f -` reads stdin. Each document keeps its file and line for error messages.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence, TextIO

from placer.definitions.catalog import Catalog
from placer.definitions.interpret import interpret
from placer.inputs.priority import PriorityClasses, from_objects, is_priority_kind, with_priorities
from placer.model.documents import decode, load_json, load_yaml
from placer.model.errors import InputError, UnknownKind
from placer.model.podspec import DEFAULT_GPU_RESOURCES, value_kind
from placer.model.workload import PlacementGroup, Workload

_SUFFIXES = (".yaml", ".yml", ".json")


@dataclass(frozen=True)
class Document:
    obj: dict[str, Any]
    source: str                   # file path, or "<stdin>"
    line: int                     # 1-based line where the document starts

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}"


def expand_paths(paths: Sequence[str]) -> list[str]:
    files: list[str] = []
    for p in paths:
        if p == "-":
            files.append(p)
            continue
        path = Path(p)
        if path.is_dir():
            found = sorted(str(f) for f in path.rglob("*") if f.suffix in _SUFFIXES and f.is_file())
            if not found:
                raise InputError("no .yaml, .yml or .json files in directory", source=p)
            files.extend(found)
        elif path.exists():
            files.append(p)
        else:
            raise InputError("no such file or directory", source=p)
    return files


def parse_text(text: str, source: str) -> list[Document]:
    if source.endswith(".json"):
        return _documents(load_json(text, source), source, 1)
    return [d for data, line in load_yaml(text, source) for d in _documents(data, source, line)]


def _documents(data: Any, source: str, line: int) -> list[Document]:
    if data is None:
        return []
    if not isinstance(data, dict):
        raise InputError(f"document at line {line} is not a mapping", source=source)
    if not data.get("apiVersion") or not data.get("kind"):
        missing = " and ".join(k for k in ("apiVersion", "kind") if not data.get(k))
        raise InputError(f"document at line {line} has no {missing}", source=source)
    if data["kind"] == "List" and isinstance(data.get("items"), list):   # kubectl's v1 List
        return [d for item in data["items"] for d in _documents(item, source, line)]
    problem = metadata_problem(data)
    if problem:
        raise InputError(f"document at line {line} ({data['kind']}): {problem}", source=source)
    return [Document(data, source, line)]


# what the API server checks of every object's identity (apimachinery's name validation)
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_PATH_SEGMENT = re.compile(r"^(?!\.\.?$)[^/%]+$")


def metadata_problem(data: Mapping[str, Any]) -> str | None:
    """The first thing wrong with apiVersion, kind, metadata.name, generateName or namespace."""
    for key in ("apiVersion", "kind"):
        if type(data[key]) is not str:
            return f"{key}: expected a string, got {value_kind(data[key])}"
    meta = data.get("metadata")
    if not isinstance(meta, dict):
        return "has no metadata.name or generateName" if meta is None else \
            f"metadata: expected a map, got {value_kind(meta)}"
    name, generate = meta.get("name"), meta.get("generateName")
    if not (name or generate):
        return "has no metadata.name or generateName"
    rbac = data["apiVersion"].startswith("rbac.authorization.k8s.io/")   # path-segment names: 'system:x'
    for key, value, pattern, limit in (("name", name, _PATH_SEGMENT if rbac else _DNS_SUBDOMAIN, 253),
                                       ("generateName", generate, None, 253),
                                       ("namespace", meta.get("namespace"), _DNS_LABEL, 63)):
        if value is None:
            continue
        if type(value) is not str:
            return f"metadata.{key}: expected a string, got {value_kind(value)}"
        if len(value) > limit or (pattern is not None and value and not pattern.match(value)):
            if pattern is _PATH_SEGMENT:
                return f"metadata.{key} {value[:80]!r}: may not contain '/' or '%' or be '.' or '..'"
            chars = "'-' or '.'" if pattern is _DNS_SUBDOMAIN else "'-'"
            return (f"metadata.{key} {value[:80]!r}: must be at most {limit} lower-case letters, digits "
                    f"and {chars}, starting and ending with a letter or digit")
    return None


# kinds that have no namespace: -n neither applies to them nor conflicts with them
CLUSTER_SCOPED = frozenset({"Namespace", "ClusterRole", "ClusterRoleBinding", "PriorityClass", "StorageClass",
                            "PersistentVolume", "CustomResourceDefinition", "WorkloadPriorityClass",
                            "ClusterQueue", "ResourceFlavor", "IngressClass", "RuntimeClass"})


def with_namespace(docs: Sequence[Document], namespace: str | None) -> list[Document]:
    """kubectl's `-n` with `-f`: objects without a namespace get it; an object whose own
    namespace differs is an error (never silently moved, never silently ignored)."""
    if not namespace:
        return list(docs)
    if len(namespace) > 63 or not _DNS_LABEL.match(namespace):
        raise InputError(f"-n {namespace[:80]!r}: a namespace is at most 63 lower-case letters, digits and '-', "
                         "starting and ending with a letter or digit")
    out = []
    for d in docs:
        if d.obj.get("kind") in CLUSTER_SCOPED:
            out.append(d)
            continue
        own = (d.obj.get("metadata") or {}).get("namespace")
        if own and own != namespace:
            raise InputError(f"the namespace from the provided object {own!r} does not match the namespace "
                             f"{namespace!r} given with -n; pass -n {own} or leave -n out", source=d.where)
        if not own:
            obj = {**d.obj, "metadata": {**d.obj["metadata"], "namespace": namespace}}
            d = Document(obj, d.source, d.line)
        out.append(d)
    return out


def read_documents(paths: Sequence[str], stdin: TextIO | None = None, *,
                   namespace: str | None = None) -> list[Document]:
    return read_files(expand_paths(paths), stdin, namespace=namespace)


def read_files(files: Sequence[str], stdin: TextIO | None = None, *,
               namespace: str | None = None) -> list[Document]:
    """The documents of `files` (as `expand_paths` gives them), in order."""
    docs: list[Document] = []
    for f in files:
        if f == "-":
            docs.extend(parse_text(_read_stdin(stdin), "<stdin>"))
            continue
        try:
            with open(f, "rb") as stream:       # not Path(f): its parsing costs more than the read
                data = stream.read()
        except OSError as e:
            raise InputError(f"cannot read: {e.strerror or e}", source=f) from None
        docs.extend(parse_text(decode(data, f), f))
    return with_namespace(docs, namespace)


def _read_stdin(stdin: TextIO | None) -> str:
    stream = stdin or sys.stdin
    raw = getattr(stream, "buffer", None)       # bytes when we can have them: decode ourselves
    if raw is not None:
        return decode(raw.read(), "<stdin>")
    try:
        return stream.read()
    except UnicodeDecodeError as e:
        raise InputError(f"not UTF-8 text: {e.reason}", source="<stdin>") from None


@dataclass(frozen=True)
class Batch:
    workloads: tuple[Workload, ...]
    companions: tuple[Document, ...]
    priority_classes: tuple[Document, ...] = ()       # PriorityClass, WorkloadPriorityClass


def classify(docs: Iterable[Document], catalog: Catalog, *,
             gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES) -> Batch:
    """Interpret every workload document; keep companions; reject anything else."""
    workloads, companions, priorities = [], [], []
    for d in docs:
        api, kind = d.obj["apiVersion"], d.obj["kind"]
        if catalog.lookup(api, kind):
            workloads.append(interpret(d.obj, catalog, gpu_resources=gpu_resources, source=d.where))
        elif catalog.is_companion(api, kind):
            companions.append(d)
        elif is_priority_kind(api, kind):
            priorities.append(d)              # says what a priority class is worth; not placed
        else:
            raise UnknownKind(f"no workload definition for {api}/{kind} and it is not a companion kind; "
                              f"add a definition (--catalog DIR, `placer catalog apply`, or a Karta applied to a "
                              f"cluster read) or list it in a "
                              f"catalog directory's companions.yaml", source=d.where)
    return Batch(tuple(workloads), tuple(companions), tuple(priorities))


def group(batch: Batch) -> list[PlacementGroup]:
    """Workloads tied by `placer.dev/group` or by a companion they share form a group;
    companions follow the workloads that reference them (see `placer.inputs.grouping`)."""
    from placer.inputs.grouping import group as by_references
    return by_references(batch.workloads, batch.companions)


def load_groups(paths: Sequence[str], catalog: Catalog, *,
                gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES,
                stdin: TextIO | None = None, namespace: str | None = None,
                priority_classes: PriorityClasses | None = None) -> list[PlacementGroup]:
    """The files' placement groups, each workload with its priority resolved: classes given
    in the files first, then `priority_classes` (read from clusters), then the built-ins."""
    batch = classify(read_documents(paths, stdin, namespace=namespace), catalog, gpu_resources=gpu_resources)
    return groups_of(batch, priority_classes)


def _each_once(workloads: Sequence[Workload]) -> None:
    """One object given twice is bad input, said where both are (before, the plan failed
    verification with exit 1: "a workload is placed twice")."""
    first: dict[Any, str | None] = {}
    for w in workloads:
        if w.ref in first:
            raise InputError(f"{w.ref} is given twice (first at {first[w.ref]})", source=w.source)
        first[w.ref] = w.source


def groups_of(batch: Batch, priority_classes: PriorityClasses | None = None) -> list[PlacementGroup]:
    """The batch's placement groups, each workload with its priority resolved (`load_groups`)."""
    _each_once(batch.workloads)
    classes = from_objects((d.obj for d in batch.priority_classes), "the given files")
    if priority_classes is not None:
        classes = classes.merged(priority_classes)
    from placer.inputs.grouping import bring_priority_classes

    return bring_priority_classes(with_priorities(group(batch), classes), [d.obj for d in batch.priority_classes])
