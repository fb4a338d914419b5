"""What a workload asks of the topology: its annotations -> `Gang.topology`. Pure.

Two sources, both read through the definition (no per-kind code):
- `placer.dev/topology-required|preferred: KEY` on the workload object applies to every
  pod of each of its gangs;
- Kueue's `kueue.x-k8s.io/podset-required|preferred-topology: KEY` on a pod template
  applies to that pod set only: the gang's pods of that instance (one replicated job, one
  worker group, the leader or the workers of a LeaderWorkerSet group), as Kueue reads it.
  Two annotated pod sets of one gang get two requests, each with a domain of its own.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Mapping, Sequence

from placer.model.errors import InputError
from placer.model.topology import (
    ANN_PREFERRED,
    ANN_REQUIRED,
    KUEUE_PREFERRED,
    KUEUE_REQUIRED,
    TopologyRequest,
    label_key_problem,
)
from placer.model.workload import Gang, Instance


def _key(annotations: Mapping[str, object], required: str, preferred: str, where: str,
         obj: str, source: str | None) -> TopologyRequest | None:
    """The one request a pod template's pair of Kueue annotations makes, or None; both set
    is an error, as Kueue's own validation has it (one topology annotation per pod set)."""
    req, pref = annotations.get(required), annotations.get(preferred)
    if req is not None and pref is not None:
        raise InputError(f"{where}annotations {required} and {preferred}: give one of them, not both "
                         f"(a set of pods is either required or preferred in one domain)", obj=obj, source=source)
    name, value = (required, req) if req is not None else (preferred, pref)
    if value is None:
        return None
    problem = label_key_problem(value.strip() if isinstance(value, str) else value)
    if problem:
        raise InputError(f"{where}annotation {name}: {problem}", obj=obj, source=source)
    assert isinstance(value, str)
    return TopologyRequest(value.strip(), required=req is not None)


def workload_requests(annotations: Mapping[str, object], obj: str,
                      source: str | None = None) -> tuple[TopologyRequest, ...]:
    """The requests of the workload's own `placer.dev/topology-*` annotations (all pods).
    Both may be given for different levels (one block required, as few racks as possible
    inside it); both naming one key contradict each other."""
    found = []
    for name, required in ((ANN_REQUIRED, True), (ANN_PREFERRED, False)):
        value = annotations.get(name)
        if value is None:
            continue
        problem = label_key_problem(value.strip() if isinstance(value, str) else value)
        if problem:
            raise InputError(f"annotation {name}: {problem}", obj=obj, source=source)
        assert isinstance(value, str)
        found.append(TopologyRequest(value.strip(), required=required))
    if len(found) == 2 and found[0].key == found[1].key:
        raise InputError(f"annotations {ANN_REQUIRED} and {ANN_PREFERRED} both name {found[0].key}: "
                         f"a level is either required or preferred", obj=obj, source=source)
    return tuple(found)


def pod_set_requests(instances: Sequence[Instance], obj: str,
                     source: str | None = None) -> dict[tuple[str, str], TopologyRequest]:
    """(component, instance) -> the request of its pod template's Kueue annotation."""
    out: dict[tuple[str, str], TopologyRequest] = {}
    for inst in instances:
        found = _key(inst.pod.annotations, KUEUE_REQUIRED, KUEUE_PREFERRED,
                     f"{inst.key}: pod template ", obj, source)
        if found is not None:
            out[(inst.component, inst.instance)] = found
    return out


def with_topology(gangs: Iterable[Gang], annotations: Mapping[str, object], instances: Sequence[Instance],
                  obj: str, source: str | None = None) -> tuple[Gang, ...]:
    """The gangs with their topology requests; unchanged (the same objects) when none."""
    gangs = tuple(gangs)
    whole = workload_requests(annotations, obj, source)
    per_set = pod_set_requests(instances, obj, source)
    if not whole and not per_set:
        return gangs
    out = []
    for g in gangs:
        requests = list(whole)
        per_component: dict[str, int] = {}
        for comp, _, _ in g.members:
            per_component[comp] = per_component.get(comp, 0) + 1
        for comp, inst, pods in g.members:
            r = per_set.get((comp, inst))
            if r is None or pods == 0:
                continue
            # a component name where it is the pod set (one instance in this gang), else
            # `component/instance`, so that one replicated job does not take its siblings along
            name = comp if per_component[comp] == 1 else f"{comp}/{inst}"
            requests.append(dataclasses.replace(r, components=frozenset({name})))
        out.append(dataclasses.replace(g, topology=tuple(dict.fromkeys(requests))) if requests else g)
    return tuple(out)
