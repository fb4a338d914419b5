"""Turning a plan into objects on clusters, and reading back what placer already placed.

Shared by `placer submit` and `placer daemon`. Two halves:

- pure: labels and annotations, `workload_key`, `prepare_objects` (a clean, labelled,
  hand-off-patched, un-suspended copy of a group for one cluster), `set_suspend`,
  `promised` (placed objects whose pods are not all bound still hold their demand) and
  `reserved_by_cluster`;
- I/O (only through `placer.kube`): `apply_group` (server-side apply, all-or-nothing per
  group), `find_placed` (every placer-managed workload on every live cluster, concurrently)
  and `read_live` (inventory + pods + placed objects in one pass per cluster).

Idempotency rests on labels: every workload placer creates carries `placer.dev/managed=true`
and `placer.dev/workload=<hash of its WorkloadRef>`, so the same workload is found on any
cluster by a label selector, whoever (submit or a restarted daemon) placed it.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import random
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Mapping, Sequence

from .catalog import Catalog
from .clusters_file import DEFAULT_POD_SECURITY, ClusterEntry, as_entry
from .errors import (EvaluationError, InputError, KubeError, NotFound, PlacerError, PodSecurityRefused, ServerError,
                     Unreachable)
from .fleet import Cluster
from .handoff_topology import ANN_TOPOLOGY, HANDOFF_AFFINITY, annotation_value, hand_off_topology
from .interpret import Interpreter, interpret, patch_pod_templates, suspend_path
from .inventory import ACTIVE_PODS, error_reason, list_runtime_classes, snapshot, with_topology
from .kube import Kube, KubeClient, Resource, run_concurrently
from .names import CLUSTER, GROUP, MANAGED, ORIGIN, PLACED_CLUSTER, PLAN, SHARED, WORKLOAD  # noqa: F401 (re-exported)
from .podsecurity import LABEL as PSA_LABEL
from .podsecurity import VERSION_LABEL as PSA_VERSION_LABEL
from .podsecurity import object_violations
from .podspec import DEFAULT_GPU_RESOURCES, pod_requests
from .quantity import add
from .topology import TopologyChoice
from .workload import Instance, Phase, PlacementGroup, Workload, WorkloadRef

# --- labels and annotations ----------------------------------------------------------

MANAGED_SELECTOR = f"{MANAGED}=true"

# fields the API server owns: never copy them from a source object to another cluster
SERVER_FIELDS = ("uid", "resourceVersion", "generation", "managedFields", "creationTimestamp",
                 "ownerReferences", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink")

# how a cluster entry wants the suspend field of a copy treated
SUSPEND_UNSUSPEND = "unsuspend"           # default: a suspended source is created running
SUSPEND_OMIT = "omit"                     # leave the field out: the cluster's admission (Kueue) owns it
SUSPEND_KEEP = "keep"                     # copy it as it is


def workload_key(obj: Mapping[str, Any]) -> str:
    """`<namespace>/<Kind.group>/<name>`: the identity of a source workload across clusters
    (the text of its WorkloadRef)."""
    return str(WorkloadRef.of(obj))


def key_of(w: Workload) -> str:
    return str(w.ref)


def legacy_key(ref: WorkloadRef) -> str:
    """`<namespace>/<Kind>/<name>`: the key placer labelled copies with before the API
    group was part of the identity; still recognised when adopting such copies."""
    return f"{ref.namespace}/{ref.kind}/{ref.name}"


def label_value(text: str) -> str:
    """A label-safe stable token for any text (label values allow no '/', at most 63 chars)."""
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def workload_label(key: str) -> str:
    return label_value(key)


_LABEL_BAD = re.compile(r"[^A-Za-z0-9_.-]")


def cluster_label(name: str) -> str:
    """The cluster name as a label value, so that `kubectl get -l placer.dev/placed-cluster=east`
    works (a context name such as an EKS ARN is squeezed into the label alphabet; the
    annotation keeps it exactly)."""
    return _LABEL_BAD.sub("-", name)[:63].strip("-_.")


def new_plan_id(now: datetime | None = None, rng: random.Random | None = None) -> str:
    now = now or datetime.now(timezone.utc)
    return f"{now.strftime('%Y%m%d-%H%M%S')}-{(rng or random).getrandbits(24):06x}"


# --- clean copies ----------------------------------------------------------------------

def strip_server_fields(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy without status and the metadata the API server sets."""
    out = copy.deepcopy(dict(obj))
    out.pop("status", None)
    meta = dict(out.get("metadata") or {})
    for f in SERVER_FIELDS:
        meta.pop(f, None)
    ann = dict(meta.get("annotations") or {})
    ann.pop("kubectl.kubernetes.io/last-applied-configuration", None)
    if ann:
        meta["annotations"] = ann
    else:
        meta.pop("annotations", None)
    out["metadata"] = meta
    return out


def set_suspend(obj: Mapping[str, Any], catalog: Catalog, mode: str = SUSPEND_UNSUSPEND) -> dict[str, Any]:
    """A copy of `obj` with its suspend field handled per `mode`: `unsuspend` sets a truthy
    suspend field to false, `omit` removes it, `keep` leaves it. Objects whose definition has
    no suspend path come back unchanged."""
    out = copy.deepcopy(dict(obj))
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
                   topology=entry.topologyHandoff or HANDOFF_AFFINITY, levels=tuple(entry.topology or ()))


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
                    topology: Mapping[WorkloadRef, Sequence[TopologyChoice]] | None = None) -> list[dict[str, Any]]:
    """The objects to create for `group` on the cluster of `cluster_entry`: companions
    first (ConfigMaps and Secrets before what mounts them), then workloads. Each is a copy
    without server-set fields, labelled and annotated for placer, namespaced, with the
    entry's hand-off applied (pod-template patch through the definition, object labels,
    suspend policy). `origin`: a string, a function of the source object, or None for each
    workload's own source file (companions then take the group key). `topology`: the
    domains the plan chose per workload (`handoff_topology.choices_by_workload`), handed
    to the cluster as node affinity or Kueue annotations (`placer.handoff_topology`)."""
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
        obj = strip_server_fields(w.obj)
        obj["metadata"]["namespace"] = w.namespace
        key = key_of(w)
        obj = set_suspend(obj, catalog, handoff.suspend)
        obj = _patch_pods(obj, catalog, handoff.pod_template_patch, workload_label(key), w.source)
        choices = (topology or {}).get(w.ref)
        if choices:
            obj = hand_off_topology(obj, catalog, choices, mode=handoff.topology, levels=handoff.levels,
                                    workload_label=(WORKLOAD, workload_label(key)), source=w.source)
            obj["metadata"].setdefault("annotations", {})[ANN_TOPOLOGY] = annotation_value(choices)
        _check_pod_security(obj, handoff.pod_security, cluster, w.source)
        _label(obj, {**handoff.object_labels, **common_lab, WORKLOAD: workload_label(key)},
               {**handoff.object_annotations, **common_ann, WORKLOAD: key,
                ORIGIN: _origin_of(origin, w.obj, w.source) or key})
        out.append(obj)
    return out


def _check_pod_security(obj: Mapping[str, Any], level: str, cluster: str, source: str | None) -> None:
    """Refuse, before anything is created, what the cluster's Pod Security level forbids
    (after the hand-off patch, which is what would run)."""
    problems = object_violations(obj, level)
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise PodSecurityRefused(
            f"pod security level {level!r} of the cluster forbids {'; '.join(problems[:3])}{more}; "
            f"set podSecurity for this cluster in the clusters file to allow it", cluster=cluster,
            obj=_ref_name(obj), source=source)


def _patch_pods(obj: dict[str, Any], catalog: Catalog, patch: Mapping[str, Any], tag: str,
                source: str | None) -> dict[str, Any]:
    """The entry's pod-template patch, plus the workload label on every pod template so
    that its pods can be found even without a pod selector. A definition that gives no
    path for pod labels gets the entry's patch alone (which then must not need labels)."""
    tagged = {**patch, "labels": {**(patch.get("labels") or {}), WORKLOAD: tag}}
    try:
        return patch_pod_templates(obj, catalog, tagged, source=source)
    except EvaluationError:
        if patch.get("labels"):
            raise
    return patch_pod_templates(obj, catalog, patch, source=source) if patch else obj


# --- applying a group: all or nothing ----------------------------------------------------

@dataclass(frozen=True)
class AppliedRef:
    """One object applied to a cluster."""

    cluster: str
    api_version: str
    kind: str
    namespace: str | None
    name: str
    created: bool                     # False when it existed already (placer's own) and was updated
    uid: str = ""
    before: str = ""                  # resourceVersion before the apply ("" when created)
    after: str = ""                   # resourceVersion after it: equal to `before` when unchanged

    @property
    def changed(self) -> bool:
        return self.created or self.before != self.after

    @property
    def ref(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"


class NotOurs(KubeError):
    """An object of the same name exists on the target and placer did not create it
    for this workload: placer never takes over someone else's object."""

    status = 409


def _ref_name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{obj.get('kind')} {ns + '/' if ns else ''}{meta.get('name')}"


def ensure_namespace(client: KubeClient, name: str, pod_security: str = DEFAULT_POD_SECURITY) -> bool:
    """Create the namespace when missing, enforcing the cluster's Pod Security level;
    True when placer created it. An existing namespace keeps the labels its owner gave it."""
    try:
        client.get("namespaces", name)
        return False
    except NotFound:
        pass
    body = {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {MANAGED: "true", PSA_LABEL: pod_security,
                                                  PSA_VERSION_LABEL: "latest"}}}
    try:
        client.create("namespaces", body)
        return True
    except KubeError as e:
        if e.status == 409:           # created meanwhile by someone else
            return False
        raise


def _is_ours(existing: Mapping[str, Any], desired: Mapping[str, Any]) -> bool:
    have = (existing.get("metadata") or {}).get("labels") or {}
    want = (desired.get("metadata") or {}).get("labels") or {}
    if have.get(MANAGED) != "true":
        return False
    if WORKLOAD in want:
        return have.get(WORKLOAD) == want[WORKLOAD]
    if ((desired.get("metadata") or {}).get("annotations") or {}).get(SHARED) == "true":
        return True                   # a companion several groups bring along: any of them may apply it
    return have.get(GROUP) == want.get(GROUP)


def apply_group(client: KubeClient, objects: Sequence[Mapping[str, Any]], *, group_key: str,
                force: bool = False, pod_security: str = DEFAULT_POD_SECURITY) -> list[AppliedRef]:
    """Server-side apply (field manager `placer`) of one group's objects, in order, after
    creating their namespaces when missing. All or nothing: when any object fails, every
    object this call created is deleted again (objects that existed before are left as
    they were) and the error is raised, naming the cluster, the object and the group.
    An object of the same name that placer did not create for this workload is refused
    (NotOurs) rather than taken over."""
    cluster = client.cluster
    resources: list[Resource] = []
    try:
        for obj in objects:
            resources.append(client.resource_for(obj["apiVersion"], obj["kind"]))
        for ns in dict.fromkeys((o.get("metadata") or {}).get("namespace") for o, r in zip(objects, resources)
                                if r.namespaced):
            if ns:
                ensure_namespace(client, ns, pod_security)
    except KubeError as e:
        raise _group_error(e, group_key, [], client) from None
    applied: list[AppliedRef] = []
    for obj, res in zip(objects, resources):
        meta = obj.get("metadata") or {}
        ns = meta.get("namespace") if res.namespaced else None
        created = False
        try:
            try:
                existing = client.get(res, meta["name"], ns)
            except NotFound:
                existing = None
            if existing is not None and not _is_ours(existing, obj):
                raise NotOurs(f"{_ref_name(obj)} already exists and was not created by placer for this "
                              f"workload; not taking it over", cluster=cluster, obj=_ref_name(obj))
            created = existing is None
            result = client.apply(obj, res, ns, force=force)
        except KubeError as e:
            # a create whose answer was lost (5xx, connection) may still have happened: remove it too
            maybe = AppliedRef(cluster, obj["apiVersion"], obj["kind"], ns, meta["name"], True) \
                if created and isinstance(e, (ServerError, Unreachable)) else None
            raise _group_error(e, group_key, applied, client, maybe) from None
        after = (result or {}).get("metadata") or {}
        before = ((existing or {}).get("metadata") or {}).get("resourceVersion", "")
        applied.append(AppliedRef(cluster, obj["apiVersion"], obj["kind"], ns, meta["name"], created,
                                  after.get("uid", ""), before, after.get("resourceVersion", "")))
    return applied


def _group_error(e: KubeError, group_key: str, applied: Sequence[AppliedRef], client: KubeClient,
                 maybe: AppliedRef | None = None) -> KubeError:
    left_applied = rollback(client, applied)
    removed = sum(1 for a in applied if a.created) - len(left_applied)
    leftovers = rollback(client, [maybe] if maybe else []) + left_applied
    note = f"group {group_key} not applied"
    if removed:
        note += f"; removed the {removed} object(s) it had created"
    if leftovers:
        note += f"; could not remove {', '.join(leftovers)}"
    err = type(e)(f"{e.message} ({note})", cluster=e.cluster or client.cluster, obj=e.obj,
                  status=e.status, reason=getattr(e, "reason", None))
    err.rolled_back = removed
    err.leftovers = leftovers
    return err


def rollback(client: KubeClient, applied: Sequence[AppliedRef]) -> list[str]:
    """Delete, newest first, what an apply created; the refs that could not be deleted."""
    left = []
    for a in reversed(applied):
        if not a.created:
            continue
        try:
            res = client.resource_for(a.api_version, a.kind)
            client.delete(res, a.name, a.namespace, missing_ok=True)
        except KubeError:
            left.append(a.ref)
    return left


# --- reading back what placer placed ------------------------------------------------------

@dataclass(frozen=True)
class PlacedRef:
    """A workload object placer created on a cluster, as read from that cluster."""

    cluster: str
    object: Mapping[str, Any]

    @property
    def meta(self) -> Mapping[str, Any]:
        return self.object.get("metadata") or {}

    @property
    def ref(self) -> WorkloadRef:
        """The copy has the identity of its source (same group, kind, namespace, name)."""
        return WorkloadRef.of(self.object)

    @property
    def key(self) -> str:
        return str(self.ref)

    @property
    def plan(self) -> str | None:
        return (self.meta.get("annotations") or {}).get(PLAN)

    @property
    def group(self) -> str | None:
        return (self.meta.get("annotations") or {}).get(GROUP)

    @property
    def origin(self) -> str | None:
        return (self.meta.get("annotations") or {}).get(ORIGIN)


class Placed(dict):
    """WorkloadRef -> PlacedRef, plus the clusters that could not be read
    (`unreachable`: cluster -> reason) and any workload found on more than one cluster
    (`duplicates`: ref -> every PlacedRef)."""

    def __init__(self, refs: Mapping[WorkloadRef, PlacedRef] = (), *,
                 unreachable: Mapping[str, str] | None = None,
                 duplicates: Mapping[WorkloadRef, Sequence[PlacedRef]] | None = None):
        super().__init__(refs)
        self.unreachable: dict[str, str] = dict(unreachable or {})
        self.duplicates: dict[WorkloadRef, list[PlacedRef]] = {k: list(v) for k, v in (duplicates or {}).items()}

    def on(self, cluster: str) -> list[PlacedRef]:
        return [r for r in self.values() if r.cluster == cluster]


def managed_objects(client: KubeClient, catalog: Catalog) -> list[dict[str, Any]]:
    """Every object labelled placer.dev/managed=true of every catalog kind the cluster
    serves (kinds it does not serve are skipped), all namespaces."""
    found: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for api_version, kind in catalog.kinds():
        try:
            res = client.resource_for(api_version, kind)
        except NotFound:
            continue
        if (res.group, res.plural) in seen:
            continue
        seen.add((res.group, res.plural))
        for item in client.list(res, label_selector=MANAGED_SELECTOR).items:
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
            if WORKLOAD in ((item.get("metadata") or {}).get("labels") or {}):
                found.append(item)
    return found


def index_placed(per_cluster: Mapping[str, Sequence[Mapping[str, Any]]],
                 unreachable: Mapping[str, str] | None = None, order: Sequence[str] = ()) -> Placed:
    """Index objects read from each cluster by WorkloadRef (clusters in `order` first)."""
    refs: dict[WorkloadRef, PlacedRef] = {}
    dups: dict[WorkloadRef, list[PlacedRef]] = {}
    names = list(order) + [c for c in per_cluster if c not in order]
    for cluster in names:
        for obj in per_cluster.get(cluster, ()):
            ref = PlacedRef(cluster, obj)
            if ref.ref in refs:
                dups.setdefault(ref.ref, [refs[ref.ref]]).append(ref)
                continue
            refs[ref.ref] = ref
    return Placed(refs, unreachable=unreachable, duplicates=dups)


def _live_entries(entries: Iterable[Any]) -> list[ClusterEntry]:
    return [e for e in map(as_entry, entries) if e.context]


def _client(kube: Kube, entry: Any) -> KubeClient:
    entry = as_entry(entry)
    return kube.client(entry.context, cluster=entry.name)


def find_placed(kube: Kube, entries: Iterable[Any], catalog: Catalog) -> Placed:
    """Every workload placer placed, on every live cluster of `entries`, read concurrently.
    A cluster that cannot be read is listed in `.unreachable`, never raised."""
    live = _live_entries(entries)

    def scan(entry: Any) -> list[dict[str, Any]] | PlacerError:
        try:
            return managed_objects(_client(kube, entry), catalog)
        except PlacerError as e:
            return e
    results = run_concurrently({e.name: (lambda e=e: scan(e)) for e in live},
                               max_workers=kube.max_workers)
    ok = {n: r for n, r in results.items() if not isinstance(r, PlacerError)}
    bad = {n: error_reason(r) for n, r in results.items() if isinstance(r, PlacerError)}
    return index_placed(ok, bad, [e.name for e in live])


@dataclass(frozen=True)
class LiveState:
    """One consistent read of the live clusters: their snapshots (with `reserved` filled
    in), every pod per cluster, what placer placed, and what of it is still promised."""

    clusters: Mapping[str, Cluster]
    pods: Mapping[str, Sequence[Mapping[str, Any]]]
    placed: Placed
    promised: Sequence[tuple[PlacementGroup, str]]


def read_cluster_state(client: KubeClient, name: str, catalog: Catalog, *,
                       labels: Mapping[str, str] | None = None, context: str | None = None
                       ) -> tuple[Cluster, list[dict[str, Any]], list[dict[str, Any]]]:
    """Nodes, non-terminated pods (as the inventory reads them) and placer's objects."""
    nodes = client.list("nodes").items
    pods = list(client.list("pods", field_selector=ACTIVE_PODS).items)
    classes = list_runtime_classes(client)
    managed = managed_objects(client, catalog)
    return snapshot(name, nodes, pods, labels=labels, context=context, runtime_class_objs=classes), pods, managed


def read_live(kube: Kube, entries: Iterable[Any], catalog: Catalog, *,
              gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES,
              interpreter: Interpreter | None = None) -> LiveState:
    """Read every live cluster of `entries` concurrently. A cluster that cannot be read
    comes back with `.error` set (and no nodes), never as an exception. `interpreter`: a
    long-lived caller's memory of interpretations (the daemon's), else none."""
    live = _live_entries(entries)

    def one(entry: Any):
        name, ctx, labels = entry.name, entry.context, dict(entry.labels or {})
        try:
            client = _client(kube, entry)
            cluster, pods, managed = read_cluster_state(client, name, catalog, labels=labels, context=ctx)
            return with_topology(cluster, client, getattr(entry, "topology", None)), pods, managed
        except PlacerError as e:
            return Cluster(name=name, labels=labels, context=ctx, error=error_reason(e)), [], None
    results = run_concurrently({e.name: (lambda e=e: one(e)) for e in live},
                               max_workers=kube.max_workers)
    order = [e.name for e in live]
    clusters = {n: results[n][0] for n in order}
    pods = {n: results[n][1] for n in order}
    placed = index_placed({n: results[n][2] for n in order if results[n][2] is not None},
                          {n: clusters[n].error for n in order if clusters[n].error}, order)
    promises = promised(placed, pods, catalog, gpu_resources=gpu_resources, interpreter=interpreter)
    reserved = reserved_by_cluster(promises)
    clusters = {n: dataclasses.replace(c, reserved=reserved.get(n, {})) for n, c in clusters.items()}
    return LiveState(clusters, pods, placed, promises)


# --- capacity already promised -----------------------------------------------------------

_TERMINAL = Phase.COMPLETED, Phase.FAILED


def _instance_pods(inst: Instance, w: Workload, pods: Sequence[Mapping[str, Any]], many: bool,
                   cache: dict[int, dict[str, int]]) -> list[Mapping[str, Any]]:
    """The pods of one instance: by the definition's pod selector; without one, the pods
    carrying the workload's label, split between instances by their requests."""
    if inst.has_selector:
        return [p for p in pods if inst.selects((p.get("metadata") or {}).get("labels") or {})]
    tag = workload_label(key_of(w))
    tagged = [p for p in pods if ((p.get("metadata") or {}).get("labels") or {}).get(WORKLOAD) == tag]
    if not many:
        return tagged
    out = []
    for p in tagged:
        req = cache.get(id(p))
        if req is None:
            req = cache[id(p)] = pod_requests((p.get("spec") or {}))
        if req == dict(inst.pod.requests):
            out.append(p)
    return out


def _covered(pod: Mapping[str, Any]) -> bool:
    """A pod whose demand the live inventory already accounts for (bound and running),
    or that is done and will not come back (Succeeded)."""
    phase = (pod.get("status") or {}).get("phase")
    if phase == "Succeeded":
        return True
    return bool((pod.get("spec") or {}).get("nodeName")) and phase != "Failed"


def outstanding(w: Workload, pods: Sequence[Mapping[str, Any]]) -> Workload | None:
    """`w` reduced to the pods it still needs that are not bound yet, or None when it
    needs nothing more (finished, or every pod bound)."""
    if w.phase in _TERMINAL:
        return None
    ns_pods = [p for p in pods if ((p.get("metadata") or {}).get("namespace") or "default") == w.namespace]
    cache: dict[int, dict[str, int]] = {}
    many = len(w.instances) > 1
    instances = []
    for inst in w.instances:
        covered = sum(1 for p in _instance_pods(inst, w, ns_pods, many, cache) if _covered(p))
        left = max(0, inst.pods - covered)
        if left:
            instances.append(dataclasses.replace(inst, pods=left))
    if not instances:
        return None
    # gangs are about co-scheduling the whole set; what is left is already placed
    return dataclasses.replace(w, instances=tuple(instances), gangs=())


def promised(placed: Mapping[WorkloadRef, PlacedRef], pods_by_cluster: Mapping[str, Sequence[Mapping[str, Any]]],
             catalog: Catalog, *, gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES,
             interpreter: Interpreter | None = None) -> list[tuple[PlacementGroup, str]]:
    """Committed demand for the solver: every placed workload whose pods are not all bound
    yet, reduced to its pods that are not bound (bound pods are in the inventory's `used`
    already), as a one-workload group on its cluster. Objects placer cannot interpret
    any more (definition removed) promise nothing."""
    out = []
    for key, ref in sorted(placed.items(), key=lambda kv: (kv[1].cluster, kv[0])):
        try:
            source = f"{ref.cluster}/{key}"
            w = (interpreter(ref.object, source) if interpreter is not None
                 else interpret(ref.object, catalog, gpu_resources=gpu_resources, source=source))
        except PlacerError:
            continue
        rest = outstanding(w, pods_by_cluster.get(ref.cluster, ()))
        if rest is not None:
            out.append((PlacementGroup(f"promised:{ref.cluster}/{key}", (rest,)), ref.cluster))
    return out


def reserved_by_cluster(promises: Iterable[tuple[PlacementGroup, str]]) -> dict[str, dict[str, int]]:
    """Totals of promised demand per cluster (what `placer clusters` shows as reserved)."""
    out: dict[str, dict[str, int]] = {}
    for g, cluster in promises:
        total = out.setdefault(cluster, {})
        for w in g.workloads:
            add(total, w.resources)
    return out
