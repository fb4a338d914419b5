"""Reading what users hand placer: files, directories, stdin; multi-document YAML or JSON.

`-f DIR` takes every .yaml/.yml/.json file under it, recursively, in sorted order;
`-f -` reads stdin. Each document keeps its file and line for error messages.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence, TextIO

import yaml

from .catalog import Catalog
from .errors import InputError, UnknownKind
from .interpret import interpret
from .names import ANN_GROUP
from .podspec import DEFAULT_GPU_RESOURCES
from .workload import PlacementGroup, Workload

_SUFFIXES = (".yaml", ".yml", ".json")
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


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
            found = sorted(str(f) for f in path.rglob("*") if f.is_file() and f.suffix in _SUFFIXES)
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
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise InputError(f"malformed JSON (line {e.lineno}): {e.msg}", source=source) from None
        return _documents(data, source, 1)
    docs: list[Document] = []
    loader = _Loader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            docs.extend(_documents(loader.construct_document(node), source, node.start_mark.line + 1))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark else ""
        raise InputError(f"malformed YAML{where}: {getattr(e, 'problem', None) or e}", source=source) from None
    finally:
        loader.dispose()
    return docs


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
    meta = data.get("metadata")
    if not isinstance(meta, dict) or not (meta.get("name") or meta.get("generateName")):
        raise InputError(f"document at line {line} ({data['kind']}) has no metadata.name or generateName",
                         source=source)
    return [Document(data, source, line)]


def read_documents(paths: Sequence[str], stdin: TextIO | None = None) -> list[Document]:
    docs: list[Document] = []
    for f in expand_paths(paths):
        if f == "-":
            docs.extend(parse_text((stdin or sys.stdin).read(), "<stdin>"))
            continue
        try:
            text = Path(f).read_text()
        except (OSError, UnicodeDecodeError) as e:
            raise InputError(f"cannot read: {getattr(e, 'strerror', None) or e}", source=f) from None
        docs.extend(parse_text(text, f))
    return docs


@dataclass(frozen=True)
class Batch:
    workloads: tuple[Workload, ...]
    companions: tuple[Document, ...]


def classify(docs: Iterable[Document], catalog: Catalog, *,
             gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES) -> Batch:
    """Interpret every workload document; keep companions; reject anything else."""
    workloads, companions = [], []
    for d in docs:
        api, kind = d.obj["apiVersion"], d.obj["kind"]
        if catalog.lookup(api, kind):
            workloads.append(interpret(d.obj, catalog, gpu_resources=gpu_resources, source=d.where))
        elif catalog.is_companion(api, kind):
            companions.append(d)
        else:
            raise UnknownKind(f"no workload definition for {api}/{kind} and it is not a companion kind; "
                              f"add a definition (--catalog DIR, or `placer catalog apply`) or list it in a "
                              f"catalog directory's companions.yaml", source=d.where)
    return Batch(tuple(workloads), tuple(companions))


def _group_key(obj: Mapping[str, Any], source: str) -> str:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return annotations.get(ANN_GROUP) or source.rpartition(":")[0] or source


def group(batch: Batch) -> list[PlacementGroup]:
    """Workloads of one file form a group, unless they share `placer.dev/group` across files.
    Companions follow the group of their file (or of their own annotation)."""
    order: dict[str, tuple[list[Workload], list[dict]]] = {}
    for w in batch.workloads:
        order.setdefault(_group_key(w.obj, w.source or w.key), ([], []))[0].append(w)
    for d in batch.companions:
        key = _group_key(d.obj, d.where)
        if key in order:
            order[key][1].append(d.obj)
    return [PlacementGroup(key, tuple(ws), tuple(cs)) for key, (ws, cs) in order.items() if ws]


def load_groups(paths: Sequence[str], catalog: Catalog, *,
                gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES,
                stdin: TextIO | None = None) -> list[PlacementGroup]:
    return group(classify(read_documents(paths, stdin), catalog, gpu_resources=gpu_resources))
