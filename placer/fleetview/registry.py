"""Workload definitions registered in a cluster, as objects of placer's CRD.

`placer catalog apply` writes each definition as a cluster-scoped `WorkloadDefinition`
(group placer.dev) whose `spec` is the definition document, installing the CRD first
when the cluster lacks it. Commands that read a cluster load these objects and let
them override the built-in catalog for the same apiVersion/kind, so a new workload type
becomes placeable with one `kubectl apply`.

They also load the cluster's Workload Map definitions (`kartas.run.ai`, cluster-scoped,
as KAI Scheduler and Run:ai register types), which serve, as in KAI, only the kinds that
no placer definition (built-in, `--catalog`, registered) serves: one `kubectl apply -f
karta.yaml` makes a new type work in KAI and placer alike.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import yaml

from placer.definitions.catalog import (
    builtin_catalog_dir,
    compile_definition,
    compile_document,
    definition_files,
    read_yaml_documents,
    unwrap,
)
from placer.kube import KubeClient
from placer.model.errors import DefinitionError, InputError, NotFound

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

    try:
        res = client.resource_for(API_VERSION, KIND)
    except NotFound:
        return []
    out = []
    for obj in client.list(res).items:
        name = (obj.get("metadata") or {}).get("name", "?")
        source = f"cluster {client.cluster}: {KIND.lower()}/{name}"
        try:
            out.append(compile_definition(obj.get("spec"), source))
        except DefinitionError as e:
            warn(f"skipping invalid definition: {e}")
    return out


def cluster_kartas(client: KubeClient, warn: Callable[[str], None]) -> list[Any]:
    """The cluster's Workload Map definitions (run.ai/v1alpha1 Karta), compiled as a Karta
    file is; invalid ones are reported through `warn` and skipped. No CRD: []."""
    try:
        res = client.resource_for(KARTA_API_VERSION, KARTA_KIND)
    except NotFound:
        return []
    out = []
    for obj in client.list(res).items:
        name = (obj.get("metadata") or {}).get("name", "?")
        # what the server added (uid, managedFields, status...) is no part of the definition
        doc = {"apiVersion": KARTA_API_VERSION, "kind": KARTA_KIND, "metadata": {"name": name},
               "spec": obj.get("spec")}
        try:
            out.append(compile_document(doc, f"cluster {client.cluster}: karta/{name}"))
        except DefinitionError as e:
            warn(f"skipping invalid definition: {e}")
    return out


@dataclass(frozen=True)
class Registered:
    """What one cluster registers: placer's definitions, and Workload Map's."""

    definitions: list[Any]
    kartas: list[Any]


def registered(client: KubeClient, warn: Callable[[str], None]) -> Registered:
    return Registered(cluster_definitions(client, warn), cluster_kartas(client, warn))


def with_cluster_definitions(catalog: Any, client: KubeClient, warn: Callable[[str], None]) -> Any:
    """The catalog plus the cluster's registered definitions (which win for their kinds),
    then its Kartas for the kinds still unserved."""
    return _layered(catalog, [registered(client, warn)])


def with_fleet_definitions(catalog: Any, kube: Any, contexts: Iterable[str | None],
                           warn: Callable[[str], None]) -> Any:
    """The catalog plus the definitions registered in each of these clusters, read
    concurrently. The first context wins a kind claimed by several (list the hub
    first, then clusters in file order). A cluster that cannot be read adds nothing:
    the inventory reports why."""
    order = list(dict.fromkeys(contexts))
    found = kube.each(lambda client: registered(client, warn), order)
    return _layered(catalog, [r for r in (found.get(ctx) for ctx in order) if isinstance(r, Registered)])


def _layered(catalog: Any, clusters: list[Registered]) -> Any:
    """`clusters` first to last: placer definitions of an earlier cluster win a kind, then
    Kartas (an earlier cluster's first) serve the kinds nothing else serves."""
    for r in reversed(clusters):
        if r.definitions:
            catalog = catalog.with_definitions(r.definitions)
    return catalog.with_fallbacks(k for r in clusters for k in r.kartas)
