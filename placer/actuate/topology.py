"""Hand-off of chosen topology domains to the cluster's own scheduler. Pure.

The solver chose, per gang, a domain of a topology level (`Placement.topology`). The
objects placer creates must carry that choice, or the cluster's scheduler may scatter the
gang across racks. Written into the pod templates of the gang's members through the
definition's paths (the same mechanism that rewrites every pod template), merged with the
user's own affinity, never replacing it:

- a required choice: a required node affinity `KEY In [domain]`, ANDed into every
  nodeSelectorTerm the template already has;
- a preferred choice: a preferred node affinity (weight 100) to the domains chosen;
- one template serving several gangs (a LeaderWorkerSet's groups all run the same leader
  and worker templates) cannot name one domain per gang: the template then gets a node
  affinity to the union of the gangs' domains, plus a required pod affinity with
  `topologyKey: KEY` over the workload's pods and `matchLabelKeys: [<gang label>]` (the
  definition's `gangPodLabel`, for LWS `leaderworkerset.sigs.k8s.io/group-key`), so each
  group's pods share one domain of that set; where the plan gave every gang a domain of
  its own, also a pod anti-affinity with `mismatchLabelKeys` (LWS's own exclusive-topology
  rule), so two gangs cannot start in one domain with room for one. Where the plan puts
  several gangs in one domain there is no exclusivity, and the cluster's scheduler may
  pair gangs and domains differently from the plan (best effort);
- a cluster entry with `topologyHandoff: kueue`: no affinity; the pod templates carry
  Kueue's `podset-required|preferred-topology: KEY` instead and Kueue's TAS assigns the
  domain inside the cluster (annotations the user wrote stay as they are).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from placer.definitions.catalog import Catalog
from placer.definitions.interpret import definition_for, interpret, object_name, target_path, template_paths
from placer.definitions.program import NOT_A_PATH
from placer.model.errors import InputError
from placer.model.topology import KUEUE_PREFERRED, KUEUE_REQUIRED, TopologyChoice
from placer.model.workload import Instance, Workload, WorkloadRef

PREFERRED_WEIGHT = 100
HANDOFF_AFFINITY, HANDOFF_KUEUE = "affinity", "kueue"
# on a created workload object: the choices it was made with, as in plan JSON, so that
# re-applying it (submit again, a spec change forwarded by the daemon) keeps them
ANN_TOPOLOGY = "placer.dev/topology"


def choices_by_workload(placements: Iterable[Any], cluster: str | None = None
                        ) -> dict[WorkloadRef, tuple[TopologyChoice, ...]]:
    """WorkloadRef -> its placement's topology choices, for `prepare_objects`; with `cluster`,
    the placements there only (a divided workload has one placement, its share, per cluster)."""
    return {p.ref: tuple(p.topology) for p in placements
            if p.ref is not None and p.topology and (cluster is None or p.cluster == cluster)}


def annotation_value(choices: Sequence[TopologyChoice]) -> str:
    return json.dumps([c.to_dict() for c in choices], separators=(",", ":"), sort_keys=True)


def choices_of(obj: Mapping[str, Any] | None) -> tuple[TopologyChoice, ...]:
    """The choices a placed object was made with (its `placer.dev/topology` annotation);
    () when it has none or it cannot be read (then nothing is handed off again)."""
    text = (((obj or {}).get("metadata") or {}).get("annotations") or {}).get(ANN_TOPOLOGY)
    try:
        entries = json.loads(text) if isinstance(text, str) else []
        out = []
        for e in entries:
            domains = e.get("domains") or ([e["domain"]] if e.get("domain") is not None else [])
            comps = e.get("components")
            out.append(TopologyChoice(str(e["gang"]), str(e["key"]), tuple(str(d) for d in domains),
                                      required=not e.get("preferred"),
                                      components=None if comps is None else tuple(str(c) for c in comps)))
        return tuple(out)
    except (ValueError, TypeError, KeyError, AttributeError):
        return ()


# --- affinity, merged ---------------------------------------------------------------------

def _requirement(key: str, values: Sequence[str]) -> dict[str, Any]:
    return {"key": key, "operator": "In", "values": list(values)}


def with_required_domain(affinity: Mapping[str, Any] | None, key: str, values: Sequence[str]) -> dict[str, Any]:
    """`affinity` with `key In values` ANDed into every required nodeSelectorTerm (one new
    term when there is none)."""
    out = copy.deepcopy(dict(affinity or {}))
    node = out.setdefault("nodeAffinity", {})
    required = node.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.get("nodeSelectorTerms") or [{}]
    req = _requirement(key, values)
    for term in terms:
        exprs = term.setdefault("matchExpressions", [])
        if req not in exprs:
            exprs.append(req)
    required["nodeSelectorTerms"] = terms
    return out


def with_preferred_domain(affinity: Mapping[str, Any] | None, key: str, values: Sequence[str]) -> dict[str, Any]:
    out = copy.deepcopy(dict(affinity or {}))
    preferred = out.setdefault("nodeAffinity", {}).setdefault("preferredDuringSchedulingIgnoredDuringExecution", [])
    term = {"weight": PREFERRED_WEIGHT, "preference": {"matchExpressions": [_requirement(key, values)]}}
    if term not in preferred:
        preferred.append(term)
    return out


def with_gang_pod_affinity(affinity: Mapping[str, Any] | None, selector: Mapping[str, str], gang_label: str,
                           key: str) -> dict[str, Any]:
    """A required pod affinity: pods of the same gang (same `gang_label` value, among
    those matching `selector`) in one domain of `key`."""
    return _with_gang_term(affinity, "podAffinity", "matchLabelKeys", selector, gang_label, key)


def with_gang_anti_affinity(affinity: Mapping[str, Any] | None, selector: Mapping[str, str], gang_label: str,
                            key: str) -> dict[str, Any]:
    """A required pod anti-affinity: no pod of another gang (another `gang_label` value,
    among those matching `selector`) in the same domain of `key`."""
    return _with_gang_term(affinity, "podAntiAffinity", "mismatchLabelKeys", selector, gang_label, key)


def _with_gang_term(affinity: Mapping[str, Any] | None, kind: str, label_keys: str, selector: Mapping[str, str],
                    gang_label: str, key: str) -> dict[str, Any]:
    """A copy of `affinity` with one required `kind` term on `key`, once."""
    out = copy.deepcopy(dict(affinity or {}))
    terms = out.setdefault(kind, {}).setdefault("requiredDuringSchedulingIgnoredDuringExecution", [])
    term = {"labelSelector": {"matchLabels": dict(selector)}, label_keys: [gang_label], "topologyKey": key}
    if term not in terms:
        terms.append(term)
    return out


# --- the object ---------------------------------------------------------------------------

def _get(obj: Any, path: Sequence[Any]) -> Any:
    for part in path:
        if obj is None:
            return None
        obj = obj[part] if isinstance(obj, list) else obj.get(part)
    return obj


def _set(obj: dict, path: Sequence[Any], value: Any) -> None:
    parent: Any = obj
    for part in path[:-1]:
        nxt = parent[part] if isinstance(parent, list) else parent.get(part)
        if nxt is None:
            nxt = parent[part] = {}
        parent = nxt
    parent[path[-1]] = value


def _covers(choice: TopologyChoice, component: str, instance: str) -> bool:
    c = choice.components
    return c is None or component in c or f"{component}/{instance}" in c


def _common_labels(instances: Sequence[Instance]) -> dict[str, str]:
    """The labels every pod of these instances carries by their pod selectors."""
    common = dict(instances[0].selector) if instances else {}
    for inst in instances[1:]:
        common = {k: v for k, v in common.items() if inst.selector.get(k) == v}
    return common


# (component, instance) -> (key, required) -> gang -> domains
Wanted = dict[tuple[str, str], dict[tuple[str, bool], dict[str, tuple[str, ...]]]]
Members = dict[tuple[str, str], tuple[Instance, Mapping[str, Any]]]


@dataclass(frozen=True)
class Templates:
    """An object's pod templates as its definition reads them (jq, run once): each member
    (component, instance) with its instance and its paths program row. What the hand-offs
    write (affinity) moves no template, so one reading serves topology and steering alike."""

    compiled: Any
    name: str
    workload: Workload
    members: Members


def templates_of(obj: Mapping[str, Any], catalog: Catalog, source: str | None = None) -> Templates:
    compiled = definition_for(obj, catalog, source)
    name = object_name(obj)
    w = interpret(obj, catalog, source=source)
    rows = template_paths(compiled, obj, name, source)[:-1]
    members: Members = {}
    for k, comp in enumerate(compiled.definition.components):
        for inst, row in zip(w.instances_of(comp.name), rows[k]):
            members[(inst.component, inst.instance)] = (inst, row)
    return Templates(compiled, name, w, members)


def hand_off_topology(obj: Mapping[str, Any], catalog: Catalog, choices: Sequence[TopologyChoice], *,
                      mode: str = HANDOFF_AFFINITY, workload_label: tuple[str, str] | None = None,
                      levels: Sequence[str] = (), source: str | None = None,
                      templates: Templates | None = None, in_place: bool = False) -> dict[str, Any]:
    """A copy of `obj` whose pod templates carry `choices` (see the module's docstring).
    `workload_label`: a label every pod template of the object carries (placer's own
    workload label), used to select the workload's pods in a pod affinity. `levels`: the
    cluster's levels, widest first (Kueue takes one annotation per pod set: the narrowest).
    `templates`: `templates_of(obj)` when the caller has it. `in_place`: `obj` itself (a dict
    the caller owns) is changed and returned."""
    if not choices:
        return dict(obj)
    t = templates or templates_of(obj, catalog, source)
    compiled, name, w, by_member = t.compiled, t.name, t.workload, t.members
    gangs = {g.name: g for g in w.gangs}
    out = obj if in_place and isinstance(obj, dict) else copy.deepcopy(dict(obj))
    gang_label = getattr(compiled.definition, "gangPodLabel", None)
    for member, per_key in _wanted(choices, gangs, name, source).items():
        inst, row = by_member[member]
        if mode == HANDOFF_KUEUE:
            _kueue_annotations(out, row, inst, per_key, levels, compiled.name, name, source)
            continue
        path = _writable(row, "affinity", compiled.name, inst, name, source)
        affinity = _get(out, path)
        for (key, required), per_gang in sorted(per_key.items()):
            domains = sorted({d for ds in per_gang.values() for d in ds})
            if not required:
                affinity = with_preferred_domain(affinity, key, domains)
                continue
            affinity = with_required_domain(affinity, key, domains)
            if len(domains) > 1 and gang_label:
                # one template, several gangs, several domains: keep each gang in one of
                # them (a definition without a gang label gets the union alone)
                members = [by_member[m][0] for g in per_gang for m in
                           ((c, i) for c, i, _ in gangs[g].members if (c, i) in by_member)]
                selector = _gang_selector(_get(out, target_path(row, "labels") or [NOT_A_PATH]) or {},
                                          workload_label, members)
                affinity = with_gang_pod_affinity(affinity, selector, gang_label, key)
                if len(domains) == len(per_gang):
                    # a domain per gang: also keep other gangs out of it (LWS's exclusive
                    # topology), so the scheduler cannot start two gangs in one domain
                    # that has room for only one; the gangs share a template, so any
                    # one-to-one assignment to the chosen domains fits as well
                    affinity = with_gang_anti_affinity(affinity, selector, gang_label, key)
        _set(out, path, affinity)
    return out


def _wanted(choices: Sequence[TopologyChoice], gangs: Mapping[str, Any], name: str, source: str | None) -> Wanted:
    """The chosen domains per pod template, per (level, required), per gang."""
    wanted: Wanted = {}
    for choice in choices:
        gang = gangs.get(choice.gang)
        if gang is None:
            raise InputError(f"the plan chose a {choice.key} domain for gang {choice.gang!r}, "
                             f"which the object does not have", obj=name, source=source)
        # every covered template, also one counting no pods yet (a worker group at 0
        # replicas that an autoscaler grows later must grow inside the same domain)
        for c, i, _ in gang.members:
            if _covers(choice, c, i) and choice.domains:
                wanted.setdefault((c, i), {}).setdefault((choice.key, choice.required), {})[gang.name] = choice.domains
    return wanted


def _gang_selector(labels: Mapping[str, Any], workload_label: tuple[str, str] | None,
                   members: Sequence[Instance]) -> dict[str, str]:
    """placer's workload label when the template carries it, else the members' common labels."""
    if workload_label is not None and labels.get(workload_label[0]) == workload_label[1]:
        return dict([workload_label])
    return _common_labels(members)


def _writable(row: Mapping[str, Any], key: str, definition: str, inst: Instance, name: str,
              source: str | None) -> list[Any]:
    path = target_path(row, key)
    if path is None or NOT_A_PATH in path:
        raise InputError(f"cannot hand the chosen topology domain to {inst.key}: definition {definition} "
                         f"gives no path to its pod template's {key}", obj=name, source=source)
    return list(path)


def _kueue_annotations(out: dict, row: Mapping[str, Any], inst: Instance,
                       per_key: Mapping[tuple[str, bool], Any], levels: Sequence[str], definition: str,
                       name: str, source: str | None) -> None:
    """Kueue's podset annotation for the pod set, unless its template has one already.
    Kueue takes one per pod set: a required request wins over a preferred one, and among
    several the narrowest level of the cluster's (which implies the wider ones)."""
    path = _writable(row, "annotations", definition, inst, name, source)
    annotations = dict(_get(out, path) or {})
    if KUEUE_REQUIRED in annotations or KUEUE_PREFERRED in annotations:
        return

    def narrowest(keys: list[str]) -> str:
        return max(keys, key=lambda k: (levels.index(k) if k in levels else -1, k))
    required = [k for k, r in per_key if r]
    preferred = [k for k, r in per_key if not r]
    if required:
        annotations[KUEUE_REQUIRED] = narrowest(required)
    elif preferred:
        annotations[KUEUE_PREFERRED] = narrowest(preferred)
    _set(out, path, annotations)
