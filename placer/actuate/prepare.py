"""Pure object preparation: the objects placer creates for a group on one cluster.

Plan ids, clean copies without server-set fields, the cluster entry's hand-off settings
(`handoff_of`), and `prepare_objects`, which stamps the labels of `placer.model.labels` and
applies the suspend policy of `placer.definitions.suspend`. No I/O.

Idempotency rests on labels: every workload placer creates carries `placer.dev/managed=true`
and `placer.dev/workload=<hash of its WorkloadRef>`, so the same workload is found on any
cluster by a label selector, whoever (submit or a restarted daemon) placed it.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Mapping, Sequence

from placer.actuate.generated import strip_generated
from placer.actuate.podsecurity import object_violations
from placer.actuate.steer import STEER_OFF, STEER_REQUIRED, fingerprint, steer_to_nodes
from placer.actuate.topology import (
    ANN_TOPOLOGY,
    HANDOFF_AFFINITY,
    HANDOFF_KUEUE,
    annotation_value,
    hand_off_topology,
    templates_of,
)
from placer.definitions.catalog import Catalog
from placer.definitions.interpret import patch_pod_templates
from placer.definitions.scale import share_object
from placer.definitions.suspend import SUSPEND_UNSUSPEND, set_suspend
from placer.inputs.clusters_file import DEFAULT_POD_SECURITY, as_entry
from placer.model.errors import EvaluationError, InputError, PodSecurityRefused
from placer.model.labels import cluster_label, label_value, workload_label
from placer.model.names import GROUP, MANAGED, ORIGIN, PLACED_CLUSTER, PLAN, WORKLOAD
from placer.model.topology import TopologyChoice
from placer.model.workload import PlacementGroup, WorkloadRef

# --- plan ids ------------------------------------------------------------------------

# fields the API server owns: never copy them from a source object to another cluster
SERVER_FIELDS = ("uid", "resourceVersion", "generation", "managedFields", "creationTimestamp",
                 "ownerReferences", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink")

def new_plan_id(now: datetime | None = None, rng: random.Random | None = None) -> str:
    now = now or datetime.now(timezone.utc)
    return f"{now.strftime('%Y%m%d-%H%M%S')}-{(rng or random).getrandbits(24):06x}"


# --- clean copies ----------------------------------------------------------------------

def strip_server_fields(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy without status, the metadata the API server sets, and what the source
    cluster's server or controllers generated (`placer.actuate.generated`). What is left
    out is never copied (a live object's managedFields and status are most of it)."""
    src = {k: v for k, v in obj.items() if k != "status"}
    if isinstance(src.get("metadata"), Mapping):
        src["metadata"] = {k: v for k, v in src["metadata"].items() if k not in SERVER_FIELDS}
    out = strip_generated(tree_copy(src))
    meta = dict(out.get("metadata") or {})
    ann = dict(meta.get("annotations") or {})
    ann.pop("kubectl.kubernetes.io/last-applied-configuration", None)
    if ann:
        meta["annotations"] = ann
    else:
        meta.pop("annotations", None)
    out["metadata"] = meta
    return out


class _NotPlain(Exception):
    """A value `tree_copy` leaves to copy.deepcopy."""


_ATOMS = frozenset({str, int, float, bool, type(None)})


def tree_copy(value: Any) -> Any:
    """copy.deepcopy of a JSON tree (dicts with string keys, lists, strings, numbers, booleans,
    None), several times faster: what a JSON reader makes. Anything else, or a dict or list
    met twice (YAML aliases; deepcopy keeps them shared), is copied by copy.deepcopy itself."""
    try:
        return _tree(value, set())
    except _NotPlain:
        return copy.deepcopy(value)


def _tree(value: Any, seen: set[int]) -> Any:
    kind = type(value)
    if kind in _ATOMS:
        return value
    if kind is not dict and kind is not list:
        raise _NotPlain
    if id(value) in seen:
        raise _NotPlain
    seen.add(id(value))
    if kind is list:
        return [v if type(v) in _ATOMS else _tree(v, seen) for v in value]
    out = {}
    for k, v in value.items():
        if type(k) is not str:
            raise _NotPlain
        out[k] = v if type(v) in _ATOMS else _tree(v, seen)
    return out


# --- the cluster entry's hand-off settings ---------------------------------------------

@dataclass(frozen=True)
class Handoff:
    """What a cluster entry asks of every object placer creates there, so that the
    cluster's own scheduler or queue (KAI Scheduler, Volcano, Kueue) takes over."""

    pod_template_patch: Mapping[str, Any] = field(default_factory=dict)   # through the definition
    object_labels: Mapping[str, str] = field(default_factory=dict)        # on the workload object
    object_annotations: Mapping[str, str] = field(default_factory=dict)
    suspend: str = SUSPEND_UNSUSPEND
    pod_security: str = DEFAULT_POD_SECURITY      # the level enforced where placer creates namespaces
    topology: str = HANDOFF_AFFINITY              # how chosen domains reach the cluster (affinity | kueue)
    levels: tuple[str, ...] = ()                  # the entry's topology levels, widest first
    steer: str = STEER_REQUIRED                   # pods to their planned nodes (placer.actuate.steer)


def _plain(v: Any) -> Any:
    if hasattr(v, "model_dump"):
        return v.model_dump(exclude_none=True, by_alias=True)
    return v


def handoff_of(entry: Any) -> Handoff:
    """The hand-off settings of a clusters-file entry: `podTemplatePatch`,
    `objectPatch: {labels, annotations}`, `suspend`."""
    if entry is None:
        return Handoff()
    entry = as_entry(entry)
    patch = _plain(entry.podTemplatePatch) or {}
    obj_patch = _plain(entry.objectPatch) or {}
    suspend = entry.suspend or SUSPEND_UNSUSPEND
    return Handoff(pod_template_patch={k: _plain(v) for k, v in dict(patch).items() if v is not None},
                   object_labels=dict(obj_patch.get("labels") or {}),
                   object_annotations=dict(obj_patch.get("annotations") or {}),
                   suspend=str(suspend), pod_security=entry.podSecurity or DEFAULT_POD_SECURITY,
                   topology=entry.topologyHandoff or HANDOFF_AFFINITY, levels=tuple(entry.topology or ()),
                   steer=_steer_of(entry))


def _steer_of(entry: Any) -> str:
    """The entry's `steer`; by default `required`, but `off` where Kueue's TAS chooses the
    nodes (`topologyHandoff: kueue`): its assignment would not know the plan's."""
    given = getattr(entry, "steer", None)
    if given:
        return str(given)
    return STEER_OFF if entry.topologyHandoff == HANDOFF_KUEUE else STEER_REQUIRED


# --- preparing a group for one cluster ---------------------------------------------------

def _label(obj: dict[str, Any], labels: Mapping[str, str], annotations: Mapping[str, str]) -> None:
    meta = obj.setdefault("metadata", {})
    meta["labels"] = {**(meta.get("labels") or {}), **labels}
    meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}


def _origin_of(origin: str | Callable[[Mapping[str, Any]], str] | None, obj: Mapping[str, Any],
               fallback: str | None) -> str | None:
    if callable(origin):
        return origin(obj)
    if origin:
        return origin
    return fallback.rsplit(":", 1)[0] if fallback and fallback.rsplit(":", 1)[-1].isdigit() else fallback


def prepare_objects(group: PlacementGroup, cluster_entry: Any, catalog: Catalog, *, plan_id: str,
                    origin: str | Callable[[Mapping[str, Any]], str] | None = None,
                    cluster: str | None = None,
                    topology: Mapping[WorkloadRef, Sequence[TopologyChoice]] | None = None,
                    shares: Mapping[WorkloadRef, int] | None = None,
                    nodes: Mapping[WorkloadRef, Mapping[str, Sequence[str]]] | None = None,
                    counts: Mapping[WorkloadRef, Mapping[str, Mapping[str, int]]] | None = None
                    ) -> list[dict[str, Any]]:
    """The objects to create for `group` on the cluster of `cluster_entry`: companions
    first (ConfigMaps and Secrets before what mounts them), then workloads. Each is a copy
    without server-set fields, labelled and annotated for placer, namespaced, with the
    entry's hand-off applied (pod-template patch through the definition, object labels,
    suspend policy). `origin`: a string, a function of the source object, or None for each
    workload's own source file (companions then take the group key). `topology`: the
    domains the plan chose per workload (`handoff_topology.choices_by_workload`), handed
    to the cluster as node affinity or Kueue annotations (`placer.actuate.topology`). `shares`:
    a divided workload's replicas on this cluster (`shares_on`), written through its scale path.
    `nodes`: per workload, the nodes the plan chose for each pod template on this cluster
    (`placer.actuate.steer.nodes_by_workload`), steered to as the entry's `steer` says; `counts`:
    the plan's pods per template and node, which `pinned` needs to gate (else `required`)."""
    cluster = cluster or (as_entry(cluster_entry).name if cluster_entry is not None else "")
    handoff = handoff_of(cluster_entry)
    if not group.workloads:
        raise InputError(f"group {group.key} has no workload")
    default_ns = group.workloads[0].namespace
    common_ann = {PLAN: plan_id, PLACED_CLUSTER: cluster, GROUP: group.key}
    common_lab = {MANAGED: "true", GROUP: label_value(group.key), PLACED_CLUSTER: cluster_label(cluster)}
    out: list[dict[str, Any]] = []
    for comp in group.companions:
        obj = strip_server_fields(comp)
        obj["metadata"].setdefault("namespace", default_ns)
        ann = {**common_ann, ORIGIN: _origin_of(origin, comp, group.key) or group.key}
        _label(obj, common_lab, ann)
        out.append(obj)
    for w in group.workloads:
        obj = strip_server_fields(w.obj)        # this call's own copy: the steps below change it in place
        obj["metadata"]["namespace"] = w.namespace
        key = str(w.ref)
        if (shares or {}).get(w.ref) is not None and w.scaling is not None:
            obj = share_object(obj, w.scaling, (shares or {})[w.ref], in_place=True)
        obj = set_suspend(obj, catalog, handoff.suspend, in_place=True)
        obj = _patch_pods(obj, catalog, handoff.pod_template_patch, workload_label(w.ref), w.source)
        choices, steered = (topology or {}).get(w.ref), (nodes or {}).get(w.ref)
        # the templates read once (jq) for both hand-offs: neither moves a template
        templates = templates_of(obj, catalog, w.source) if choices and steered else None
        if choices:
            obj = hand_off_topology(obj, catalog, choices, mode=handoff.topology, levels=handoff.levels,
                                    workload_label=(WORKLOAD, workload_label(w.ref)), source=w.source,
                                    templates=templates, in_place=True)
            obj["metadata"].setdefault("annotations", {})[ANN_TOPOLOGY] = annotation_value(choices)
        if steered:
            obj = steer_to_nodes(obj, catalog, steered, mode=handoff.steer, source=w.source,
                                 planned_for=fingerprint(w), templates=templates, counts=(counts or {}).get(w.ref),
                                 in_place=True)
        _check_pod_security(obj, handoff.pod_security, cluster, w.source)
        _label(obj, {**handoff.object_labels, **common_lab, WORKLOAD: workload_label(w.ref)},
               {**handoff.object_annotations, **common_ann, WORKLOAD: key,
                ORIGIN: _origin_of(origin, w.obj, w.source) or key})
        out.append(obj)
    return out


def shares_on(placements: Sequence[Any], cluster: str) -> dict[WorkloadRef, int]:
    """The divided workloads' replicas on `cluster` (placer.dev/spread: divide), by ref."""
    return {p.ref: p.replicas for p in placements
            if p.cluster == cluster and p.replicas is not None and p.ref is not None}


def _check_pod_security(obj: Mapping[str, Any], level: str, cluster: str, source: str | None) -> None:
    """Refuse, before anything is created, what the cluster's Pod Security level forbids
    (after the hand-off patch, which is what would run)."""
    problems = object_violations(obj, level)
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise PodSecurityRefused(
            f"pod security level {level!r} of the cluster forbids {'; '.join(problems[:3])}{more}; "
            f"set podSecurity for this cluster in the clusters file to allow it", cluster=cluster,
            obj=ref_name(obj), source=source)


def _patch_pods(obj: dict[str, Any], catalog: Catalog, patch: Mapping[str, Any], tag: str,
                source: str | None) -> dict[str, Any]:
    """The entry's pod-template patch, plus the workload label on every pod template so
    that its pods can be found even without a pod selector. A definition that gives no
    path for pod labels gets the entry's patch alone (which then must not need labels).
    In place (`obj` is the caller's own copy): a patch that fails writes nothing first."""
    tagged = {**patch, "labels": {**(patch.get("labels") or {}), WORKLOAD: tag}}
    try:
        return patch_pod_templates(obj, catalog, tagged, source=source, in_place=True)
    except EvaluationError:
        if patch.get("labels"):
            raise
    return patch_pod_templates(obj, catalog, patch, source=source, in_place=True) if patch else obj



def ref_name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{obj.get('kind')} {ns + '/' if ns else ''}{meta.get('name')}"

