"""A workload as it will run once placed: its suspend field handled, its peak demand counted.

Pure: the definition names the suspend field (`suspend_path`); placer creates copies running
unless a cluster entry asks otherwise (its admission, Kueue say, owns the field).
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Mapping, Sequence

from placer.definitions.catalog import Catalog
from placer.definitions.interpret import interpret, suspend_path
from placer.model.errors import InputError
from placer.model.podspec import DEFAULT_GPU_RESOURCES
from placer.model.workload import PlacementGroup

# how a cluster entry wants the suspend field of a copy treated
SUSPEND_UNSUSPEND = "unsuspend"           # default: a suspended source is created running
SUSPEND_OMIT = "omit"                     # leave the field out: the cluster's admission (Kueue) owns it
SUSPEND_KEEP = "keep"                     # copy it as it is


def set_suspend(obj: Mapping[str, Any], catalog: Catalog, mode: str = SUSPEND_UNSUSPEND, *,
                in_place: bool = False) -> dict[str, Any]:
    """A copy of `obj` with its suspend field handled per `mode`: `unsuspend` sets a truthy
    suspend field to false, `omit` removes it, `keep` leaves it. Objects whose definition has
    no suspend path come back unchanged. `in_place`: `obj` itself (a dict the caller owns)."""
    out = obj if in_place and isinstance(obj, dict) else copy.deepcopy(dict(obj))
    if mode == SUSPEND_KEEP:
        return out
    path = suspend_path(out, catalog)
    if not path:
        return out
    parent: Any = out
    for part in path[:-1]:
        parent = parent.get(part) if isinstance(parent, dict) else None
        if parent is None:
            return out                     # the field is absent: nothing suspended
    last = path[-1]
    if not isinstance(parent, dict) or last not in parent:
        return out
    if mode == SUSPEND_OMIT:
        del parent[last]
    elif mode == SUSPEND_UNSUSPEND:
        if parent[last]:
            parent[last] = False
    else:
        raise InputError(f"suspend: {mode!r}: expected one of {SUSPEND_UNSUSPEND}, {SUSPEND_OMIT}, {SUSPEND_KEEP}")
    return out


def planning_view(group: PlacementGroup, catalog: Catalog, *,
                  gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES) -> PlacementGroup:
    """The group as it will run once placed: suspended workloads are re-interpreted
    un-suspended (a suspended RayCluster, for one, counts no workers), and a workload whose
    gangs start in windows counts what must fit at once (`Workload.at_once`)."""
    changed = False
    workloads = []
    for w in group.workloads:
        if w.suspended:
            running = interpret(set_suspend(w.obj, catalog), catalog, gpu_resources=gpu_resources,
                                source=w.source)
            # keep policy set on the Workload itself (a --cluster pin is not in the object)
            w = dataclasses.replace(running, annotations=w.annotations, labels=w.labels)
            changed = True
        peak = w.at_once()
        changed = changed or peak is not w
        workloads.append(peak)
    return dataclasses.replace(group, workloads=tuple(workloads)) if changed else group
