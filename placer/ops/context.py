"""What every command works with, built once per command: the clusters in effect, the
catalog merged with the definitions the live clusters register, the Kubernetes handle and
the resource names counted as GPUs.

`open_context` is the one place that resolves the clusters, loads the catalog and reads
the fleet's definitions; the use cases take the `Context` instead of threading catalog,
kubeconfig and GPU names through every call. The layers below (solve, definitions,
model) keep taking plain values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from placer.definitions.catalog import Catalog, load_catalog
from placer.fleetview.registry import with_fleet_definitions
from placer.inputs.clusters_file import ClusterEntry, ClustersFile, as_entry
from placer.inputs.targets import FROM_FILE, Targets, resolve_clusters
from placer.kube import Kube
from placer.model.podspec import DEFAULT_GPU_RESOURCES

Say = Callable[[str], None]


def _quiet(message: str) -> None:
    return None


@dataclass(frozen=True)
class Scope:
    """The options naming what a command works on (as the CLI's flags give them)."""

    clusters: str | None = None                  # clusters file
    kubeconfig: str | None = None
    contexts: tuple[str, ...] = ()
    all_contexts: bool = False
    catalog_dirs: tuple[str, ...] = ()
    gpu_resources: tuple[str, ...] = tuple(DEFAULT_GPU_RESOURCES)


@dataclass(frozen=True)
class Context:
    """The clusters, the catalog (with the fleet's definitions), the Kube handle and the
    GPU resource names of one command. Close it (or use it in `with`) when done."""

    targets: Targets
    catalog: Catalog
    kube: Kube
    gpu_resources: tuple[str, ...] = tuple(DEFAULT_GPU_RESOURCES)
    warn: Say = field(default=_quiet, compare=False)

    @property
    def entries(self) -> list[ClusterEntry]:
        return self.targets.clusters

    @property
    def live(self) -> list[ClusterEntry]:
        return self.targets.live

    def close(self) -> None:
        self.kube.close()

    def __enter__(self) -> "Context":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_context(scope: Scope, *, warn: Say = _quiet, notice: Say | None = None,
                 check: Callable[[Targets], None] | None = None) -> Context:
    """Resolve the clusters (`notice` hears what must be said about them, e.g. the bundled
    example fleet), run `check` on them (bad input fails before anything is read), then
    load the catalog and add the definitions registered in the live clusters; `warn`
    hears definitions that could not be used."""
    targets = resolve_clusters(scope.clusters, kubeconfig=scope.kubeconfig, contexts=scope.contexts,
                               all_contexts=scope.all_contexts)
    if targets.notice and notice:
        notice(targets.notice)
    if check:
        check(targets)
    return context_for(targets, scope, warn=warn)


def context_for(targets: Targets, scope: Scope, *, warn: Say = _quiet) -> Context:
    """The Context of clusters already resolved."""
    # reads the kubeconfig only when a client is asked for (or takes the one read to check the contexts)
    kube = Kube(scope.kubeconfig, config=targets.kubeconfig)
    try:
        catalog = with_fleet_definitions(load_catalog(scope.catalog_dirs), kube,
                                         [e.context for e in targets.live], warn)
    except BaseException:
        kube.close()
        raise
    return Context(targets, catalog, kube, tuple(scope.gpu_resources), warn)


def local_context(scope: Scope, *, warn: Say = _quiet) -> Context:
    """A Context of no clusters: the catalog of `scope` alone, nothing read from a fleet
    (`describe -f` is pure; `describe KIND/NAME` reads the one cluster it names itself)."""
    return context_for(_targets_of([], "no clusters"), scope, warn=warn)


def context_of(entries: Sequence[Any], catalog: Catalog, kube: Kube, *,
               gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES, warn: Say = _quiet) -> Context:
    """A Context of clusters given as values (clusters-file entries or plain mappings, as
    libraries and tests write them) with a catalog already loaded: nothing is resolved."""
    return Context(_targets_of(entries, "the given clusters"), catalog, kube, tuple(gpu_resources), warn)


def _targets_of(entries: Sequence[Any], description: str) -> Targets:
    file = ClustersFile.model_construct(hub=None, clusters=[as_entry(e) for e in entries])
    return Targets(file, description, FROM_FILE)
