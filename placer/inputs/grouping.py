"""Placement groups from what really ties workloads together.

Workloads land together on one cluster when they share the annotation `placer.dev/group`,
or reference the same companion object given with them: a ConfigMap, Secret or
PersistentVolumeClaim they mount or read, a ServiceAccount they run as, a Service (or
PodDisruptionBudget) whose selector matches their pods, an HPA scaling them; companions
tie through each other too (a RoleBinding to a ServiceAccount, an Ingress to a Service).
The groups are the connected components of that reference graph. A companion nothing
references follows every workload of its file it could belong to (same namespace), and
when that is more than one group, a note says so.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping, Sequence

from placer.model.names import ANN_GROUP, SHARED
from placer.model.selectors import match_labels, matches_labels
from placer.model.workload import PlacementGroup, Workload

Ref = tuple[str, str]                               # (Kind, name) in the object's namespace

# field -> (kind it names, key holding the name) wherever they appear in a pod spec
_NAMED = {"configMap": ("ConfigMap", "name"), "configMapRef": ("ConfigMap", "name"),
          "configMapKeyRef": ("ConfigMap", "name"), "secretRef": ("Secret", "name"),
          "secretKeyRef": ("Secret", "name"), "persistentVolumeClaim": ("PersistentVolumeClaim", "claimName")}


def workload_refs(obj: Mapping[str, Any]) -> set[Ref]:
    """Every ConfigMap, Secret, PVC and ServiceAccount named anywhere in the object's spec
    (pod templates of any depth, whatever the workload type). A loop over a stack, not a
    recursive generator (issue 24: one generator per value was most of grouping)."""
    refs: set[Ref] = set()
    stack = [obj.get("spec")]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, dict):
            for key, value in node.items():
                if key in _REF_KEYS:
                    refs.update(_refs(key, value))
                if isinstance(value, (dict, list)):
                    stack.append(value)
    return refs


_REF_KEYS = frozenset(_NAMED) | {"secret", "serviceAccountName", "serviceAccount", "imagePullSecrets"}
REF_KINDS = frozenset({"ConfigMap", "Secret", "PersistentVolumeClaim", "ServiceAccount"})     # what _refs yields


def _refs(key: str, value: Any) -> Iterator[Ref]:
    """What one field names (a key of _REF_KEYS)."""
    if key in _NAMED and isinstance(value, dict) and isinstance(value.get(_NAMED[key][1]), str):
        yield _NAMED[key][0], value[_NAMED[key][1]]
    elif key == "secret" and isinstance(value, dict):          # a volume, or a projected source
        name = value.get("secretName") or value.get("name")
        if isinstance(name, str):
            yield "Secret", name
    elif key in ("serviceAccountName", "serviceAccount") and isinstance(value, str) and value:
        yield "ServiceAccount", value
    elif key == "imagePullSecrets" and isinstance(value, list):
        yield from (("Secret", s["name"]) for s in value if isinstance(s, dict) and isinstance(s.get("name"), str))


def _pod_labels(w: Workload) -> list[Mapping[str, str]]:
    """Per instance, the labels its pods carry: the template's plus the operator's."""
    return [{**i.pod.labels, **i.selector} for i in w.instances]


def _selects(match: Mapping[str, Any], pod_labels: Sequence[Mapping[str, str]]) -> bool:
    return any(matches_labels(match, labels) for labels in pod_labels)


def _companion_targets(obj: Mapping[str, Any]) -> set[Ref]:
    """What a companion names by kind and name: RoleBinding subjects and role, an Ingress's
    backend Services, an HPA's scale target."""
    spec = obj.get("spec") or {}
    kind = obj.get("kind")
    out: set[Ref] = set()
    if kind in ("RoleBinding",):
        out |= {("ServiceAccount", s["name"]) for s in obj.get("subjects") or ()
                if isinstance(s, dict) and s.get("kind") == "ServiceAccount" and isinstance(s.get("name"), str)}
        role = obj.get("roleRef") or {}
        if role.get("kind") == "Role" and isinstance(role.get("name"), str):
            out.add(("Role", role["name"]))
    elif kind == "Ingress":
        out |= {("Service", n) for n in _service_names(spec)}
    elif kind == "HorizontalPodAutoscaler":
        target = spec.get("scaleTargetRef") or {}
        if isinstance(target.get("kind"), str) and isinstance(target.get("name"), str):
            out.add((target["kind"], target["name"]))
    return out


def _service_names(node: Any) -> Iterator[str]:
    if isinstance(node, list):
        for item in node:
            yield from _service_names(item)
    elif isinstance(node, dict):
        svc = node.get("service")
        if isinstance(svc, dict) and isinstance(svc.get("name"), str):
            yield svc["name"]
        for v in node.values():
            yield from _service_names(v)


def _ns(obj: Mapping[str, Any]) -> str | None:
    return (obj.get("metadata") or {}).get("namespace")


def _name(obj: Mapping[str, Any]) -> str:
    return (obj.get("metadata") or {}).get("name") or ""


def _annotation(obj: Mapping[str, Any]) -> str | None:
    return ((obj.get("metadata") or {}).get("annotations") or {}).get(ANN_GROUP)


def _file(where: str | None) -> str:
    """The file of a `path:line` source."""
    if not where:
        return ""
    head, sep, tail = where.rpartition(":")
    return head if sep and tail.isdigit() else where


Node = tuple[str, Any]                              # ("w", i), ("c", j) or ("g", annotation value)
Edge = tuple[Node, Node]


class Graph:
    """The reference graph, kept as its connected components (union-find): connectivity is
    all that grouping asks of it (issue 24: importing networkx for it cost every plan of
    files about 0.15 s)."""

    def __init__(self) -> None:
        self.parent: dict[Node, Node] = {}

    def add_nodes_from(self, nodes: Iterable[Node]) -> None:
        for n in nodes:
            self.parent.setdefault(n, n)

    def add_edges_from(self, edges: Iterable[Edge]) -> None:
        for a, b in edges:
            ra, rb = self._root(a), self._root(b)
            if ra != rb:
                self.parent[rb] = ra

    def _root(self, n: Node) -> Node:
        root = self.parent.setdefault(n, n)
        while self.parent[root] != root:
            root = self.parent[root]
        while n != root:                              # path compression
            self.parent[n], n = root, self.parent[n]
        return root

    def connected_components(self) -> list[set[Node]]:
        comps: dict[Node, set[Node]] = {}
        for n in list(self.parent):
            comps.setdefault(self._root(n), set()).add(n)
        return list(comps.values())


def build_graph(workloads: Sequence[Workload], companions: Sequence[Any]) -> Graph:
    """Nodes ("w", i) per workload and ("c", j) per companion (a Document); edges for every
    tie, and ("g", value) hubs for the `placer.dev/group` annotation."""
    g = Graph()
    g.add_nodes_from(("w", i) for i in range(len(workloads)))
    g.add_nodes_from(("c", j) for j in range(len(companions)))
    ties = _Ties.of(workloads, companions)
    for i, w in enumerate(workloads):
        g.add_edges_from(_workload_edges(i, w, ties))
    for j, d in enumerate(companions):
        g.add_edges_from(_companion_edges(j, d.obj, ties))
    return g


@dataclass(frozen=True)
class _Ties:
    """What ties are looked up in: the companions by (kind, name, namespace), and each
    workload's pod labels, indexed by label pair (a selector's candidates)."""

    workloads: Sequence[Workload]
    by_ref: Mapping[tuple[str, str, str | None], list[int]]
    pod_labels: Sequence[list[Mapping[str, str]]]
    by_label: Mapping[tuple[str, str], list[int]]
    # whether a workload can name any companion given (one of REF_KINDS): without one,
    # walking each workload's spec for names finds no tie (issue 24: half of grouping
    # 1,000 workloads that come with Services only)
    nameable: bool

    @classmethod
    def of(cls, workloads: Sequence[Workload], companions: Sequence[Any]) -> "_Ties":
        by_ref: dict[tuple[str, str, str | None], list[int]] = {}
        for j, d in enumerate(companions):
            by_ref.setdefault((d.obj.get("kind"), _name(d.obj), _ns(d.obj)), []).append(j)
        pod_labels = [_pod_labels(w) for w in workloads]
        by_label: dict[tuple[str, str], list[int]] = {}
        for i, per in enumerate(pod_labels):
            for pair in {p for labels in per for p in labels.items()}:
                by_label.setdefault(pair, []).append(i)
        return cls(workloads, by_ref, pod_labels, by_label, any(k[0] in REF_KINDS for k in by_ref))

    def companions_named(self, kind: str, name: str, ns: str | None) -> list[int]:
        """A companion without a namespace stands in every namespace."""
        return self.by_ref.get((kind, name, ns), []) + (self.by_ref.get((kind, name, None), []) if ns else [])


def _workload_edges(i: int, w: Workload, ties: _Ties) -> Iterator[Edge]:
    """The workload's group hub, and the companions it names."""
    if _annotation(w.obj):
        yield ("w", i), ("g", _annotation(w.obj))
    for kind, name in workload_refs(w.obj) if ties.nameable else ():
        for j in ties.companions_named(kind, name, w.namespace):
            yield ("w", i), ("c", j)


def _companion_edges(j: int, obj: Mapping[str, Any], ties: _Ties) -> Iterator[Edge]:
    """The companion's group hub, the workloads its selector matches, and what it names."""
    if _annotation(obj):
        yield ("c", j), ("g", _annotation(obj))
    for i in _selected(obj, ties):
        yield ("w", i), ("c", j)
    ns = _ns(obj)
    for tkind, tname in _companion_targets(obj):
        for other in ties.companions_named(tkind, tname, ns):
            yield ("c", j), ("c", other)
        for i, w in enumerate(ties.workloads):
            if w.kind == tkind and w.name == tname and (ns is None or ns == w.namespace):
                yield ("c", j), ("w", i)


def _selected(obj: Mapping[str, Any], ties: _Ties) -> Iterator[int]:
    """The workloads whose pods a Service's or PodDisruptionBudget's selector matches."""
    kind, spec = obj.get("kind"), obj.get("spec") or {}
    match = match_labels(spec.get("selector")) if kind in ("Service", "PodDisruptionBudget") else None
    if not match:
        return
    ns = _ns(obj)
    k, v = next(iter(match.items()))
    for i in ties.by_label.get((k, v), ()):            # candidates carry one of its labels
        if (ns is None or ns == ties.workloads[i].namespace) and _selects(match, ties.pod_labels[i]):
            yield i


def group(workloads: Sequence[Workload], companions: Sequence[Any]) -> list[PlacementGroup]:
    """The placement groups of these workloads and companion Documents, in file order."""
    g = build_graph(workloads, companions)
    per_file: dict[str, list[int]] = {}
    for i, w in enumerate(workloads):
        per_file.setdefault(_file(w.source), []).append(i)
    every = g.connected_components()
    components = sorted((c for c in every if any(n[0] == "w" for n in c)),
                        key=lambda c: min(n[1] for n in c if n[0] == "w"))
    groups: list[tuple[str, list[int], list[int]]] = []
    for comp in components:
        ws = sorted(n[1] for n in comp if n[0] == "w")
        cs = sorted(n[1] for n in comp if n[0] == "c")
        groups.append((_key(comp, ws, workloads, per_file), ws, cs))
    groups = _distinct_keys(groups, workloads)
    alone = {n[1] for c in every if not any(m[0] == "w" for m in c) for n in c if n[0] == "c"}
    loose = sorted(alone)
    shared, notes = _place_loose(loose, companions, workloads, groups)
    out = []
    for n, (key, ws, cs) in enumerate(groups):
        objs = [companions[j].obj for j in cs]
        objs += [_mark_shared(companions[j].obj) if len(shared[j]) > 1 else companions[j].obj
                 for j in sorted(j for j in shared if n in shared[j])]
        out.append(PlacementGroup(key, tuple(workloads[i] for i in ws), tuple(objs), tuple(notes.get(n, ()))))
    return out


def _key(comp: Iterable[tuple[str, Any]], ws: list[int], workloads: Sequence[Workload],
         per_file: Mapping[str, list[int]]) -> str:
    """The annotation's value; else the file, when the group is all of its file's workloads;
    else `file#namespace/name` of its first workload."""
    hubs = sorted(n[1] for n in comp if n[0] == "g")
    if hubs:
        return "+".join(hubs)
    first = workloads[ws[0]]
    file = _file(first.source)
    if file and per_file.get(file) == ws:
        return file
    return f"{file}#{first.key}" if file else first.key


def _distinct_keys(groups: list[tuple[str, list[int], list[int]]], workloads: Sequence[Workload]
                   ) -> list[tuple[str, list[int], list[int]]]:
    """Two groups whose first workloads share namespace/name (a Job and a Deployment
    `ml/train`) are keyed by the workloads' full references instead."""
    seen: dict[str, int] = {}
    for key, _, _ in groups:
        seen[key] = seen.get(key, 0) + 1
    out = []
    for key, ws, cs in groups:
        if seen[key] > 1 and "#" in key:
            first = workloads[ws[0]]
            key = f"{key.rpartition('#')[0]}#{getattr(first, 'ref', first.key)}"
        out.append((key, ws, cs))
    return out


def _place_loose(loose: list[int], companions: Sequence[Any], workloads: Sequence[Workload],
                 groups: list[tuple[str, list[int], list[int]]]
                 ) -> tuple[dict[int, list[int]], dict[int, list[str]]]:
    """Unreferenced companion -> the groups it follows (those holding a workload of its file
    in its namespace), and group -> notes saying so where that is more than one group."""
    follows: dict[int, list[int]] = {}
    notes: dict[int, list[str]] = {}
    for j in loose:
        d = companions[j]
        ns = _ns(d.obj)
        file = _file(d.where)
        targets = [n for n, (_, ws, _) in enumerate(groups)
                   if any(_file(workloads[i].source) == file and (ns is None or workloads[i].namespace == ns)
                          for i in ws)]
        if not targets:
            continue
        follows[j] = targets
        if len(targets) > 1:
            names = ", ".join(groups[n][0] for n in targets)
            note = (f"{d.obj.get('kind')} {_name(d.obj)} ({d.where}) is referenced by no workload: "
                    f"it goes with each group of its file ({names})")
            for n in targets:
                notes.setdefault(n, []).append(note)
    return follows, notes


def _mark_shared(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A companion copied into several groups: placer may apply it for each of them."""
    meta = dict(obj.get("metadata") or {})
    meta["annotations"] = {**(meta.get("annotations") or {}), SHARED: "true"}
    return {**obj, "metadata": meta}


def bring_priority_classes(groups: Sequence[PlacementGroup], objects: Sequence[Mapping[str, Any]]
                           ) -> list[PlacementGroup]:
    """Each group with the PriorityClasses of the same files that its pods name (`brings`):
    submit creates them on its cluster when missing there."""
    by_name = {_name(o): o for o in objects
               if o.get("kind") == "PriorityClass" and str(o.get("apiVersion") or "").startswith("scheduling.k8s.io/")}
    if not by_name:
        return list(groups)
    out = []
    for g in groups:
        used = sorted({i.pod.priority_class_name for w in g.workloads for i in w.instances
                       if i.pod.priority_class_name in by_name})
        out.append(dataclasses.replace(g, brings=tuple(by_name[n] for n in used)) if used else g)
    return out
