"""A pod's shape from one row of a definition's fused program: what scheduling needs of it.

The row holds the pod template (or its spec and metadata) and the definition's `pod.fields`,
which override the template's. Reading is fast and trusting; when it fails, the slow
`shape_problem` names the first mistyped field. Pure, no I/O.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import orjson

from placer.definitions.program import Columns
from placer.model.errors import InputError
from placer.model.podspec import SEQUENCES, constraint_problem, effective_requests, shape_problem
from placer.model.workload import PodShape

# shapes read, by the columns and the JSON text of what they are read from: a run's
# workloads repeat a few hundred pod templates (358 distinct among the 1,646 instances of
# the 1k benchmark); bounded, since a daemon interprets objects for days
_SHAPES: dict[tuple[Columns, bytes], PodShape] = {}
_SHAPES_MAX = 8192


def pod_shape(row: list[Any], c: Columns) -> PodShape:
    """The pod of one instance row, remembered by value (the shape and its maps are never
    changed once made); InputError naming the first problem with it."""
    try:
        key = (c, orjson.dumps([row[n] for n in c.pod]))
    except (orjson.JSONEncodeError, TypeError):         # beyond what orjson writes: read it
        return read_pod_shape(row, c)
    found = _SHAPES.get(key)
    if found is None:
        found = read_pod_shape(row, c)
        if len(_SHAPES) >= _SHAPES_MAX:
            _SHAPES.clear()
        _SHAPES[key] = found
    return found


def read_pod_shape(row: list[Any], c: Columns) -> PodShape:
    """The pod of one instance row, read; InputError naming the first problem with it."""
    spec, meta = _template_parts(row, c)
    resources = None
    try:
        containers = _containers(spec)      # the template's own containers must read, fields or not
        if c.fields:
            spec, meta, resources, main = _with_fields(spec, meta, row, c.fields)
            containers = _containers(spec)
            if resources is not None:
                containers = _with_main_resources(list(containers), resources, main)
        shape, problem = _read_shape(spec, meta, containers)
    except (AttributeError, TypeError, ValueError, KeyError):
        raise InputError(shape_problem(spec, meta, resources)) from None
    if problem:
        raise InputError(problem)
    return shape


def _template_parts(row: list[Any], c: Columns) -> tuple[Any, Any]:
    """The pod's spec and metadata: from `pod.template`, else `pod.spec` and `pod.metadata`."""
    tpl = row[c.tpl] if c.tpl is not None else None
    spec = meta = None
    if isinstance(tpl, dict):
        spec, meta = tpl.get("spec"), tpl.get("metadata")
    spec = spec or (row[c.spec] if c.spec is not None else None) or {}
    meta = meta or (row[c.meta] if c.meta is not None else None) or {}
    return spec, meta


def _with_fields(spec: Any, meta: Any, row: list[Any], fields: tuple[tuple[str, int], ...],
                 ) -> tuple[dict[str, Any], dict[str, Any], Any, Any]:
    """`pod.fields` over the template's parts, on copies: labels and annotations into the
    metadata, the rest into the spec; `resources` and `mainContainer` returned aside."""
    spec, meta = dict(spec), dict(meta)
    resources = main = None
    for field, col in fields:
        value = row[col]
        if value is None:
            continue
        if field in ("labels", "annotations"):
            meta[field] = value
        elif field == "resources":
            resources = value
        elif field == "mainContainer":
            main = value
        else:
            spec[field] = value
    return spec, meta, resources, main


def _read_shape(spec: Any, meta: Any, containers: Sequence[Any]) -> tuple[PodShape, str | None]:
    """The pod's shape and the first problem with its node constraints; TypeError (and the
    errors of reading) where a field has the wrong type."""
    requests = effective_requests(containers, spec.get("initContainers") or (), spec.get("overhead"),
                                  spec.get("resources"))
    affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution") or {}
    node_selector, terms = spec.get("nodeSelector") or {}, affinity.get("nodeSelectorTerms") or ()
    tolerations, labels = spec.get("tolerations") or (), meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    # what dict()/tuple() would silently misread (a string as a list of characters)
    if not (type(node_selector) is dict and type(labels) is dict and type(annotations) is dict
            and type(terms) in SEQUENCES and type(tolerations) in SEQUENCES):
        raise TypeError
    scheduler, priority = spec.get("schedulerName"), spec.get("priorityClassName")
    runtime = spec.get("runtimeClassName")
    if not all(v is None or type(v) is str for v in (scheduler, priority, runtime)):
        raise TypeError
    problem = constraint_problem(node_selector, terms, tolerations) if node_selector or terms or tolerations else None
    return PodShape(
        requests=requests, node_selector=dict(node_selector), affinity_terms=tuple(terms),
        tolerations=tuple(tolerations), labels=dict(labels), annotations=dict(annotations),
        scheduler_name=scheduler, priority_class_name=priority, runtime_class=runtime or None,
        overhead_set=bool(spec.get("overhead"))), problem


def _containers(spec: Mapping[str, Any]) -> Sequence[Any]:
    containers = spec.get("containers")
    if containers is None:
        return ()
    if type(containers) not in SEQUENCES:     # `containers: {}` is not "no containers"
        raise TypeError
    return containers


def _with_main_resources(containers: list[dict], resources: Any, main: str | None) -> list[dict]:
    """Merge a ResourceRequirements over the main container's (or make the only container);
    a null entry leaves the container's own value."""
    resources = resources or {}
    idx = next((k for k, c in enumerate(containers) if c.get("name") == main), 0) if containers else None
    if idx is None:
        return [{"name": main or "main", "resources": resources}]
    merged = dict(containers[idx])
    old = merged.get("resources") or {}
    merged["resources"] = {part: {**(old.get(part) or {}),
                                  **{k: v for k, v in (resources.get(part) or {}).items() if v is not None}}
                           for part in ("requests", "limits")}
    return containers[:idx] + [merged] + containers[idx + 1:]
