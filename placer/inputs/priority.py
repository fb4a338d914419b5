"""A workload's priority, from Kubernetes' own ways of saying it.

In increasing precedence: the pods' `priorityClassName` (a PriorityClass's value; a
PriorityClass with `globalDefault: true` covers pods naming none), Kueue's
`kueue.x-k8s.io/priority-class` label (a WorkloadPriorityClass's value), and placer's
own annotation `placer.dev/priority`, which overrides both. The value is worked out here,
before solving, and handed to the solver through the annotation it already reads (on the
interpreted Workload only; the object itself is never changed). An unknown class is an
input error naming the workload and the class.

Classes come from the files given (PriorityClass and WorkloadPriorityClass documents), from
the hub and the live clusters (read through placer.kube), and Kubernetes' two built-in
system classes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from placer.model.errors import InputError, NotFound, PlacerError
from placer.model.names import ANN_PRIORITY
from placer.model.workload import PlacementGroup, Workload

KUEUE_LABEL = "kueue.x-k8s.io/priority-class"
PRIORITY_CLASS = ("scheduling.k8s.io", "PriorityClass")
WORKLOAD_PRIORITY_CLASS = ("kueue.x-k8s.io", "WorkloadPriorityClass")
# Kubernetes creates these in every cluster (pkg/apis/scheduling: SystemCriticalPriority = 2e9)
BUILTIN = {"system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}


def is_priority_kind(api_version: str, kind: str) -> bool:
    return (api_version.rpartition("/")[0], kind) in (PRIORITY_CLASS, WORKLOAD_PRIORITY_CLASS)


@dataclass(frozen=True)
class PriorityClasses:
    """name -> value, for PriorityClasses and Kueue WorkloadPriorityClasses; where each
    was read (for error messages)."""

    pod: Mapping[str, int] = field(default_factory=lambda: dict(BUILTIN))
    kueue: Mapping[str, int] = field(default_factory=dict)
    global_default: int | None = None
    sources: tuple[str, ...] = ()

    def merged(self, other: "PriorityClasses") -> "PriorityClasses":
        """These classes, completed by `other`'s for names these do not have."""
        return PriorityClasses({**other.pod, **self.pod}, {**other.kueue, **self.kueue},
                               self.global_default if self.global_default is not None else other.global_default,
                               self.sources + other.sources)


def from_objects(objects: Iterable[Mapping[str, Any]], source: str) -> PriorityClasses:
    """Classes from PriorityClass / WorkloadPriorityClass objects (others ignored)."""
    pod, kueue, default = dict(BUILTIN), {}, None
    for obj in objects:
        kind = (str(obj.get("apiVersion") or "").rpartition("/")[0], obj.get("kind"))
        name = (obj.get("metadata") or {}).get("name")
        value = obj.get("value")
        if kind not in (PRIORITY_CLASS, WORKLOAD_PRIORITY_CLASS):
            continue
        if not isinstance(value, int) or isinstance(value, bool):
            raise InputError(f"{kind[1]} {name}: value {value!r} is not an integer", source=source)
        if not isinstance(name, str) or not name:
            raise InputError(f"{kind[1]}: metadata.name is missing", source=source)
        if kind == PRIORITY_CLASS:
            pod[name] = value
            if obj.get("globalDefault") is True:
                default = value
        else:
            kueue[name] = value
    return PriorityClasses(pod, kueue, default, (source,))


def read_classes(kube: Any, contexts: Sequence[str | None], warn: Callable[[str], None] = lambda m: None
                 ) -> PriorityClasses:
    """The classes defined in these clusters (hub first, then targets in file order; the
    first to define a name wins). A cluster that cannot be read adds nothing."""
    def one(client: Any) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        for (group, kind), version in ((PRIORITY_CLASS, "v1"), (WORKLOAD_PRIORITY_CLASS, "v1beta1")):
            try:
                res = client.resource_for(f"{group}/{version}", kind)
            except NotFound:
                continue                                       # e.g. no Kueue on this cluster
            for item in client.list(res).items:
                found.append({**item, "apiVersion": f"{group}/{version}", "kind": kind})
        return found
    order = list(dict.fromkeys(contexts))
    result = kube.each(one, order) if order else {}
    classes = PriorityClasses(sources=())
    for ctx in order:
        got = result.get(ctx)
        if isinstance(got, PlacerError):
            warn(f"priority classes of context {ctx} not read: {got}")
            classes = classes.merged(PriorityClasses(sources=(f"context {ctx} (not readable: {got.message})",)))
            continue
        classes = classes.merged(from_objects(got or [], f"context {ctx}"))
    return classes


def priority_of(w: Workload, classes: PriorityClasses) -> int | None:
    """The priority Kubernetes gives `w` (None: nothing says; the solver's default 0)."""
    value = None
    names = sorted({i.pod.priority_class_name for i in w.instances if i.pod.priority_class_name})
    if names:
        unknown = [n for n in names if n not in classes.pod]
        if unknown:
            raise InputError(f"priorityClassName {unknown[0]!r}: no such PriorityClass "
                             f"({_where(classes)}); create it, or set placer.dev/priority", obj=w.key,
                             source=w.source)
        value = max(classes.pod[n] for n in names)       # the workload waits for its most important pods
    elif classes.global_default is not None:
        value = classes.global_default
    label = (w.labels or {}).get(KUEUE_LABEL)
    if label:
        if label not in classes.kueue:
            raise InputError(f"label {KUEUE_LABEL}={label}: no such WorkloadPriorityClass "
                             f"({_where(classes)}); create it, or set placer.dev/priority", obj=w.key,
                             source=w.source)
        value = classes.kueue[label]
    return value


def _where(classes: PriorityClasses) -> str:
    return "looked in " + (", ".join(classes.sources) if classes.sources else "the built-in system classes")


def with_priorities(groups: Sequence[PlacementGroup], classes: PriorityClasses) -> list[PlacementGroup]:
    """Groups whose workloads carry their Kubernetes priority in the annotation the solver
    reads, unless the user set that annotation (which wins)."""
    out = []
    for g in groups:
        workloads = []
        for w in g.workloads:
            if ANN_PRIORITY not in (w.annotations or {}):
                value = priority_of(w, classes)
                if value is not None:
                    w = dataclasses.replace(w, annotations={**w.annotations, ANN_PRIORITY: str(value)})
            workloads.append(w)
        out.append(dataclasses.replace(g, workloads=tuple(workloads)))
    return out
