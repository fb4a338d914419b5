"""The problem as the solver sees it: every group's parts, policy and topology units, every
reachable cluster's node classes, and which clusters each group may use at all."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable, Mapping, Sequence

from placer.model import reasons as R
from placer.model.errors import InputError
from placer.model.fleet import Cluster, Fleet
from placer.model.workload import PlacementGroup
from placer.solve.accepts import refusal
from placer.solve.domains import HOSTNAME, missing_key, needs_node_classes, tag_parts, units_of
from placer.solve.groups import GPU_RESOURCES, ClusterInfo, GroupInfo, Part, gpus_of, pred_key, sort_key
from placer.solve.policy import group_policy, policy_reason
from placer.solve.ranking import cost_units, ordered, ranks_of
from placer.solve.scheduling import admitted, pod_demand, runtime_overhead
from placer.solve.state import ClusterState, PodAssign, redo_all
from placer.solve.storage import claims_of, storage_reason

NODE_EXACT_MAX_NODES = 100         # up to this many nodes, every node is its own class (exact)


@dataclass
class Problem:
    fleet: Fleet
    clusters: list[Cluster]
    infos: dict[int, ClusterInfo]               # reachable clusters only
    groups: list[GroupInfo]
    committed: list[tuple[GroupInfo, int]]
    gpu_names: tuple[str, ...] = GPU_RESOURCES
    node_exact: bool = False

    def state(self) -> dict[int, ClusterState]:
        """Every reachable cluster's free capacity, fresh (copied from one built per cluster)."""
        return {c: self.state_of(c) for c in self.infos}

    def state_of(self, c: int) -> ClusterState:
        """Cluster c's free capacity, fresh: a copy of one built once (cheaper than building)."""
        pristine = self.__dict__.setdefault("_pristine", {})
        got = pristine.get(c)
        if got is None:
            got = pristine[c] = ClusterState(self.infos[c])
        return got.copy()


def group_info(index: int, group: PlacementGroup, names: Sequence[str] = GPU_RESOURCES) -> GroupInfo:
    parts = []
    for w in group.workloads:
        for inst in w.instances:
            if inst.pods <= 0:
                continue
            demand = pod_demand(inst.pod)
            parts.append(Part(w, inst, demand, pred_key(inst.pod), gpus_of(demand, names), sort_key(demand, names)))
    # the group is given its topology requests as units, each covered part a type of its own
    g = GroupInfo(index, group, group_policy(group), parts, units=units_of(parts))
    tag_parts(g)
    return g


def uses_match_fields(groups: Iterable[GroupInfo]) -> bool:
    return any(t.get("matchFields") for g in groups for p in g.parts for t in p.instance.pod.affinity_terms)


def prepare(fleet: Fleet, groups: Sequence[PlacementGroup],
            committed: Sequence[tuple[PlacementGroup, str]] = (),
            gpu_resources: Sequence[str] = GPU_RESOURCES, node_exact: bool | None = None) -> Problem:
    """`node_exact`: every node its own class, so the model constrains every resource per
    node (exact); by default when the fleet is small (NODE_EXACT_MAX_NODES)."""
    gpu_names = tuple(gpu_resources)
    ginfos = [group_info(i, g, gpu_names) for i, g in enumerate(groups)]
    cinfos = [group_info(len(ginfos) + i, g, gpu_names) for i, (g, _) in enumerate(committed)]
    if node_exact is None:
        node_exact = sum(len(cl.nodes) for cl in fleet.clusters if cl.reachable) <= NODE_EXACT_MAX_NODES
    by_name = node_exact or uses_match_fields(ginfos + cinfos)
    clusters = list(fleet.clusters)
    everyone = ginfos + cinfos
    # whether any group asks for the host level, once (issue 24: once per cluster over all groups)
    host = any(u.key == HOSTNAME for g in everyone for u in g.units)
    infos = {c: ClusterInfo(c, cl, by_name or (host and needs_node_classes(cl, everyone)), gpu_names)
             for c, cl in enumerate(clusters) if cl.reachable}
    names = {cl.name: c for c, cl in enumerate(clusters)}
    for rank, g in enumerate(sorted(ginfos, key=lambda g: g.key)):
        g.rank = rank
    # a group's claims are walked out of its objects only when some cluster knows its
    # StorageClasses (storage_reason judges no other): simulated clusters declare none
    # (issue 24: a third of `judge` at 1,000 groups)
    storage = any(cl.storage_classes is not None for cl in clusters)
    memo: dict = {}
    for g in ginfos:
        judge(g, clusters, infos, names, gpu_names, storage, memo)
    rank_clusters(ginfos, clusters)
    com = [(g, committed_on(g, cname, clusters, names, gpu_names)) for g, (_, cname) in zip(cinfos, committed)]
    return Problem(fleet, clusters, infos, ginfos, com, gpu_names, node_exact)


def judge(g: GroupInfo, clusters: Sequence[Cluster], infos: Mapping[int, ClusterInfo], names: Mapping[str, int],
          gpu_names: Sequence[str], storage: bool = True, memo: dict | None = None) -> None:
    """Which clusters the group may use at all (`g.eligible`) and why not the others
    (`g.static`): its policy, refusals, RuntimeClasses, storage (unless no cluster knows its
    StorageClasses: `storage` False), topology keys. `memo` (one per prepare) keeps what
    depends on the clusters alone: an open policy's reasons, which clusters may refuse."""
    memo = {} if memo is None else memo
    if g.policy.open:       # the same reasons for every group without pins, selectors or exclusions
        policy = memo.get("open")
        if policy is None:
            policy = memo["open"] = [policy_reason(g, cl, names) for cl in clusters]
    else:
        policy = [policy_reason(g, cl, names) for cl in clusters]
    missing = _runtime_classes(g, [clusters[c] for c in infos if policy[c] is None], gpu_names) \
        if any(p.instance.pod.runtime_class for p in g.parts) else None
    claims = claims_of(g.group) if storage else ()
    kinds = tuple(p.kind_key for p in g.parts)
    several = len(g.group.workloads) > 1
    knowing = memo.get("knowing")
    if knowing is None:     # clusters that may refuse a group (`refusal` says None of the others)
        knowing = memo["knowing"] = [cl.serves is not None or cl.priority_classes is not None for cl in clusters]
    # the checks that cannot fail for this group are not asked per cluster (issue 24: 10,000
    # groups x 100 clusters)
    for c, cl in enumerate(clusters):
        reason = (policy[c] or (refusal(g.group, cl) if knowing[c] else None)
                  or (missing.get(cl.name) if missing else None)
                  or (storage_reason(claims, cl, several) if claims else None)
                  or (missing_key(g, cl) if g.units else None))
        if reason is not None:
            g.static[c] = reason
            continue
        info = infos.get(c)
        if info is not None:
            may = info.may_use.get(kinds)           # `_may_use`, its memo inline: most calls end here
            if may if may is not None else _may_use(g, info, kinds):
                g.eligible.append(c)
        # else: no node could take some pod at all; placer.solve.explain says which


def rank_clusters(groups: Sequence[GroupInfo], clusters: Sequence[Cluster]) -> None:
    """Each group's clusters in its own order (issue 21): its ranks, then cost, then file order."""
    units = cost_units(clusters)
    by_order: dict[tuple[str, ...], tuple[int, ...]] = {}       # most groups give no order
    for g in groups:
        ranks = by_order.get(g.policy.order)
        if ranks is None:
            ranks = by_order[g.policy.order] = ranks_of(g.policy.order, clusters)
        g.ranks = ranks
        g.eligible = ordered(g.eligible, g.ranks, units)


def committed_on(g: GroupInfo, cname: str, clusters: Sequence[Cluster], names: Mapping[str, int],
                 gpu_names: Sequence[str]) -> int:
    """A committed group's cluster index, its pods' demand with that cluster's RuntimeClass overhead."""
    if cname not in names:
        raise InputError(f"committed group {g.key} is on cluster {cname!r}, which is not in the fleet")
    _runtime_classes(g, [clusters[names[cname]]], gpu_names)
    return names[cname]


def _may_use(g: GroupInfo, info: ClusterInfo, kinds: tuple) -> bool:
    """Some schedulable node passes each pod kind's predicates and has room for one pod
    (remembered per cluster by the group's pod kinds: groups repeat them)."""
    got = info.may_use.get(kinds)
    if got is None:
        got = info.may_use[kinds] = bool(info.classes) and all(info.compat(p) for p in g.parts)
    return got


def _runtime_classes(g: GroupInfo, candidates: Sequence[Cluster], names: Sequence[str]) -> dict[str, R.Reason]:
    """Add to each part's demand the overhead its RuntimeClass puts on every pod: the
    largest among the candidate clusters (exact when there is one; never less than any).
    Clusters without that RuntimeClass come back with a reason (they refuse the pods)."""
    missing: dict[str, R.Reason] = {}
    for p in g.parts:
        if not p.instance.pod.runtime_class:
            continue                    # no RuntimeClass: no overhead, and no admission to refuse it
        extra: dict[str, int] = {}
        for cl in candidates:
            got = runtime_overhead(p.instance.pod, cl.runtime_classes)
            if got is None or admitted(p.instance.pod, cl.runtime_classes) is None:
                missing.setdefault(cl.name, _refused(p, cl))
            for r, v in (got or {}).items():
                extra[r] = max(extra.get(r, 0), v)
        if extra:
            p.demand = {r: p.demand.get(r, 0) + extra.get(r, 0) for r in {**p.demand, **extra}}
            p.gpu, p.sort_key = gpus_of(p.demand, names), sort_key(p.demand, names)
            g.forget()
    return missing


def _refused(p: Part, cl: Cluster) -> R.Reason:
    shape = p.instance.pod
    rc = (cl.runtime_classes or {}).get(shape.runtime_class or "")
    clash = next((f"{k}={shape.node_selector[k]}" for k, v in (rc.node_selector if rc else {}).items()
                  if shape.node_selector.get(k, v) != v), "")
    return R.UnknownRuntimeClass(p.instance.key, shape.runtime_class or "", clash)




def rebase(problem: Problem, states: Mapping[int, ClusterState]) -> Problem:
    """The same problem on the fleet as left by the committed groups."""
    if not problem.committed:
        return problem
    clusters = list(problem.clusters)
    for c, st in states.items():
        cl = clusters[c]
        info = st.info
        nodes = []
        for i, node in enumerate(info.nodes):
            base_free = info.class_free[st.node_class[i]]
            used = dict(node.used)
            for r, v in base_free.items():
                taken = v - st.free[i].get(r, 0)
                if taken and r in node.allocatable:
                    used[r] = used.get(r, 0) + taken
            nodes.append(_replace_used(node, used))
        nodes += [n for n in cl.nodes if not n.ready]
        clusters[c] = replace(cl, nodes=tuple(nodes))
    fleet = replace(problem.fleet, clusters=tuple(clusters))
    fresh = prepare(fleet, [g.group for g in problem.groups], gpu_resources=problem.gpu_names,
                    node_exact=problem.node_exact)
    fresh.committed = problem.committed
    return fresh


def _replace_used(node, used):
    return replace(node, used=used)



def states_of(problem: Problem, result: Mapping[int, tuple[int, PodAssign]],
              keep=lambda g: True) -> dict[int, ClusterState]:
    """Free capacity per cluster after the result's placements of the groups `keep` selects."""
    states = problem.state()
    by_idx = {g.index: g for g in problem.groups}
    placed: dict[int, list[tuple[GroupInfo, PodAssign]]] = {}
    for gi, (c, assign) in result.items():
        g = by_idx[gi]
        if keep(g):
            placed.setdefault(c, []).append((g, assign))
    for c, on in placed.items():
        redo_all(states[c], on)         # the plan's pods in bulk, each node moved once
    return states


__all__: Sequence[str] = ("GPU_RESOURCES", "NODE_EXACT_MAX_NODES", "Problem", "committed_on", "gpus_of",
                          "group_info", "judge", "prepare", "rebase", "states_of", "uses_match_fields")
