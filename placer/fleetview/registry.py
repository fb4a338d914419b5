"""Workload definitions registered in a cluster, as objects of placer's CRD.

`placer catalog apply` writes each definition as a cluster-scoped `WorkloadDefinition`
(group placer.dev) whose `spec` is the definition document, installing the CRD first
when the cluster lacks it. Commands that read a cluster load these objects and let
them override the built-in catalog for the same apiVersion/kind, so a new workload type
becomes placeable with one `kubectl apply`.

They also load the cluster's Workload Map definitions (`kartas.run.ai`, cluster-scoped,
as KAI Scheduler and Run:ai register types), which serve, as in KAI, only the kinds that
no placer definition (built-in, `--catalog`, registered) serves: one `kubectl apply -f
karta.yaml` makes a new type work in KAI and placer alike. With `prefer="karta"` a Karta
wins every kind it claims instead.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

import yaml

from placer.definitions.catalog import (
    PLACER_FORMAT,
    PREFERENCES,
    Catalog,
    CompiledDefinition,
    builtin_catalog_dir,
    compile_definition,
    compile_document,
    definition_files,
    read_yaml_documents,
    unwrap,
)
from placer.definitions.karta import FORMAT as KARTA_FORMAT
from placer.model.errors import DefinitionError, InputError, NotFound

if TYPE_CHECKING:
    from placer.kube import KubeClient  # the client library loads when a client is made

GROUP = "placer.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "WorkloadDefinition"
CRD_NAME = f"workloaddefinitions.{GROUP}"
CRD_FILE = "workloaddefinitions.placer.dev.yaml"
KARTA_API_VERSION = "run.ai/v1alpha1"           # Workload Map's kartas.run.ai, cluster-scoped
KARTA_KIND = "Karta"


def crd_manifest() -> dict[str, Any]:
    path = builtin_catalog_dir() / "crd" / CRD_FILE
    try:
        return yaml.safe_load(path.read_text())
    except OSError:
        raise InputError("placer's CRD file is missing from the installation", source=str(path)) from None


def builtin_definition_files() -> list[Path]:
    return definition_files(builtin_catalog_dir())


# --- writing -----------------------------------------------------------------------

def definition_object(definition: Mapping[str, Any]) -> dict[str, Any]:
    """The WorkloadDefinition object carrying one definition document."""
    return {"apiVersion": API_VERSION, "kind": KIND,
            "metadata": {"name": definition["name"],
                         "labels": {"app.kubernetes.io/managed-by": "placer"}},
            "spec": dict(definition)}


def ensure_crd(client: KubeClient, *, wait: float = 30.0,
               sleep: Callable[[float], None] = time.sleep) -> bool:
    """Install the CRD when the cluster does not serve it; wait until it is served.
    True when it was installed now."""
    try:
        client.resource_for(API_VERSION, KIND)
        return False
    except NotFound:
        pass
    client.apply(crd_manifest(), "customresourcedefinitions.apiextensions.k8s.io", force=True)
    deadline = time.monotonic() + wait
    while True:
        crd = client.get("customresourcedefinitions.apiextensions.k8s.io", CRD_NAME)
        established = any(c.get("type") == "Established" and c.get("status") == "True"
                          for c in (crd.get("status") or {}).get("conditions") or ())
        if established:
            try:
                client.resource_for(API_VERSION, KIND)   # rediscovers on a miss
                return True
            except NotFound:
                pass
        if time.monotonic() > deadline:
            raise NotFound(f"CRD {CRD_NAME} was created but is not served after {wait:.0f}s",
                           cluster=client.cluster)
        sleep(0.2)


@dataclass(frozen=True)
class Applied:
    name: str
    kinds: tuple[str, ...]                  # apiVersion/kind it matches
    source: str


def read_definition_files(paths: Iterable[str | Path]) -> list[tuple[str, dict[str, Any]]]:
    """(source, document) per definition in the files (a file may hold several), each
    validated and compiled first: an invalid one is a DefinitionError naming file and field."""

    docs: list[tuple[str, dict[str, Any]]] = []
    for path in paths:
        loaded = read_yaml_documents(Path(path))
        for i, doc in enumerate(loaded):
            source = str(path) if len(loaded) == 1 else f"{path}[{i}]"
            compile_document(doc, source)
            docs.append((source, unwrap(doc, source)[0]))
    return docs


def apply_definitions(client: KubeClient, docs: Iterable[tuple[str, Mapping[str, Any]]]
                      ) -> list[Applied]:
    """Install the CRD if needed, then server-side apply each definition (forcing:
    placer owns these objects)."""
    docs = list(docs)
    ensure_crd(client)
    applied = []
    for source, doc in docs:
        client.apply(definition_object(doc), force=True)
        kinds = tuple(f"{m['apiVersion']}/{m['kind']}" for m in doc.get("matches") or ())
        applied.append(Applied(doc["name"], kinds, source))
    return applied


# --- reading -----------------------------------------------------------------------

def cluster_definitions(client: KubeClient, warn: Callable[[str], None]) -> list[Any]:
    """The compiled definitions registered in the cluster; invalid ones are reported
    through `warn` and skipped. None registered, or no CRD: []."""
    return _registered(client, API_VERSION, KIND, warn, _definition)


def cluster_kartas(client: KubeClient, warn: Callable[[str], None]) -> list[Any]:
    """The cluster's Workload Map definitions (run.ai/v1alpha1 Karta), compiled as a Karta
    file is; invalid ones are reported through `warn` and skipped. No CRD: []."""
    return _registered(client, KARTA_API_VERSION, KARTA_KIND, warn, _karta)


def _definition(obj: dict[str, Any], source: str) -> CompiledDefinition:
    return _compiled(obj.get("spec"), source, compile_definition)


def _karta(obj: dict[str, Any], source: str) -> CompiledDefinition:
    # what the server added (uid, managedFields, status...) is no part of the definition
    name = (obj.get("metadata") or {}).get("name", "?")
    doc = {"apiVersion": KARTA_API_VERSION, "kind": KARTA_KIND, "metadata": {"name": name},
           "spec": obj.get("spec")}
    return _compiled(doc, source, compile_document)


def _registered(client: KubeClient, api_version: str, kind: str, warn: Callable[[str], None],
                compile_one: Callable[[dict[str, Any], str], CompiledDefinition]) -> list[CompiledDefinition]:
    """Every object of a cluster-scoped definition kind, compiled; an invalid one is one
    warning naming it (`cluster C: kind/name`) and skipped. The kind not served: []."""
    try:
        res = client.resource_for(api_version, kind)
    except NotFound:
        return []
    return _compile_all(client.list(res).items, client.cluster, kind, warn, compile_one)


def _compile_all(objs: Iterable[dict[str, Any]], cluster: str, kind: str, warn: Callable[[str], None],
                 compile_one: Callable[[dict[str, Any], str], CompiledDefinition]) -> list[CompiledDefinition]:
    out = []
    for obj in sorted(objs, key=lambda o: (o.get("metadata") or {}).get("name", "")):
        name = (obj.get("metadata") or {}).get("name", "?")
        try:
            out.append(compile_one(obj, f"cluster {cluster}: {kind.lower()}/{name}"))
        except DefinitionError as e:
            warn(f"skipping invalid definition: {e}")
    return out


_COMPILED: dict[tuple[str, str], CompiledDefinition] = {}
_COMPILED_LOCK = threading.Lock()


def _compiled(doc: Any, source: str, compile: Callable[[Any, str], CompiledDefinition]) -> CompiledDefinition:
    """Compiled once per process while the object is unchanged: the daemon re-reads the
    registered definitions on every discovery poll, and an unchanged definition must stay the
    same object (no jq compilation per poll; the catalog it serves is seen as unchanged)."""
    key = (source, json.dumps(doc, sort_keys=True, default=str))
    with _COMPILED_LOCK:
        found = _COMPILED.get(key)
    if found is None:
        found = compile(doc, source)              # an invalid one raises, and is not remembered
        with _COMPILED_LOCK:
            if len(_COMPILED) > 1024:             # definitions edited over and over
                _COMPILED.clear()
            found = _COMPILED.setdefault(key, found)
    return found


@dataclass(frozen=True)
class Registered:
    """What one cluster registers: placer's definitions, and Workload Map's."""

    definitions: list[Any]
    kartas: list[Any]


def registered(client: KubeClient, warn: Callable[[str], None]) -> Registered:
    return Registered(cluster_definitions(client, warn), cluster_kartas(client, warn))


def registered_objects(cluster: str, definitions: Iterable[dict[str, Any]], kartas: Iterable[dict[str, Any]],
                       warn: Callable[[str], None]) -> Registered:
    """What a cluster registers, from objects already read (a watch's cache: the daemon
    follows them without listing again); compiled and named as `registered` does."""
    return Registered(_compile_all(definitions, cluster, KIND, warn, _definition),
                      _compile_all(kartas, cluster, KARTA_KIND, warn, _karta))


def with_cluster_definitions(catalog: Any, client: KubeClient, warn: Callable[[str], None], *,
                             prefer: str = PLACER_FORMAT) -> Any:
    """The catalog plus the cluster's registered definitions (which win for their kinds),
    then its Kartas for the kinds still unserved (or, with `prefer="karta"`, for every kind
    they claim)."""
    return layered(catalog, [registered(client, warn)], prefer)


def read_fleet(kube: Any, contexts: Iterable[str | None], warn: Callable[[str], None]
               ) -> dict[str | None, Registered | Exception]:
    """What each of these clusters registers, read concurrently (a cluster that cannot be
    read: its error, in its slot)."""
    order = list(dict.fromkeys(contexts))
    found = kube.each(lambda client: registered(client, warn), order)
    return {ctx: found.get(ctx, NotFound("not read")) for ctx in order}


def with_fleet_definitions(catalog: Any, kube: Any, contexts: Iterable[str | None],
                           warn: Callable[[str], None], *, prefer: str = PLACER_FORMAT) -> Any:
    """The catalog plus the definitions registered in each of these clusters, read
    concurrently. The first context wins a kind claimed by several (list the hub
    first, then clusters in file order). A cluster that cannot be read adds nothing:
    the inventory reports why."""
    found = read_fleet(kube, contexts, warn)
    return layered(catalog, [r for r in found.values() if isinstance(r, Registered)], prefer)


def layered(catalog: Catalog, clusters: list[Registered], prefer: str = PLACER_FORMAT) -> Catalog:
    """`clusters` first to last: placer definitions of an earlier cluster win a kind, then
    Kartas (an earlier cluster's first) serve the kinds nothing else serves. With
    `prefer="karta"` a Karta wins every kind it claims: registered placer definitions
    override the catalog's placer definitions only, the catalog's own Kartas (`--catalog`)
    come above them, and registered Kartas above all."""
    if prefer not in PREFERENCES:
        raise InputError(f"prefer: {prefer!r}: expected one of {', '.join(PREFERENCES)}")
    placer_defs = [d for r in reversed(clusters) for d in r.definitions]
    if prefer == PLACER_FORMAT:
        return catalog.with_definitions(placer_defs).with_fallbacks(k for r in clusters for k in r.kartas)
    file_kartas = {gvk: d for gvk, d in catalog.by_gvk.items() if d.format == KARTA_FORMAT}
    by_gvk = dict(catalog.with_definitions(placer_defs).by_gvk)
    by_gvk.update(file_kartas)
    for k in (k for r in reversed(clusters) for k in r.kartas):
        for m in k.definition.matches:
            by_gvk[(m.apiVersion, m.kind)] = k
    return Catalog(by_gvk, catalog.companion_kinds)
