"""Topology requests on a divided workload's gangs (issue 21): each LeaderWorkerSet group of a
share keeps its `placer.dev/topology-required` level inside its cluster. Judged from the plan's
nodes and the fleet's labels (tests/solve/oracle.py's exact fit per rack, no solver): the most
groups a cluster holds is the sum over its racks of the most groups each rack holds alone."""

import copy
import dataclasses

import pytest

from placer.actuate.topology import hand_off_topology
from placer.definitions.catalog import load_catalog
from placer.definitions.interpret import interpret
from placer.definitions.scale import share_object
from placer.model.errors import InputError
from placer.model.fleet import Fleet
from placer.model.workload import PlacementGroup, Workload
from placer.solve import solve
from tests.builders import cluster, fleet
from tests.solve import oracle as O
from tests.solve.test_spread_units import _no_selectors, example

CATALOG = load_catalog()
RACK = "example.com/rack"


def lws(groups: int, gpus: int, **ann: str) -> dict:
    worker = {"name": "w", "image": "x", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": str(gpus)},
                                                       "limits": {"nvidia.com/gpu": str(gpus)}}}
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "serve", "namespace": "ns", "annotations": {
                "placer.dev/spread": "divide", "placer.dev/topology-required": RACK,
                **{f"placer.dev/{k.replace('_', '-')}": v for k, v in ann.items()}}},
            "spec": {"replicas": groups, "leaderWorkerTemplate": {"size": 2, "workerTemplate": {"spec": {
                "containers": [worker]}}}}}


def groups_per_rack(f: Fleet, unit: Workload) -> dict[str, dict[str, int]]:
    """cluster -> rack -> the most whole groups (the unit's pods) that rack's nodes hold alone."""
    out: dict[str, dict[str, int]] = {}
    for cl in f.clusters:
        racks: dict[str, list] = {}
        for n in cl.nodes:
            if RACK in n.labels:
                racks.setdefault(n.labels[RACK], []).append(n)
        for rack, nodes in racks.items():
            k = 0
            while O.fits([dataclasses.replace(i, replicas=(k + 1) * i.replicas, pods=(k + 1) * i.pods)
                          for i in unit.instances], nodes, [O.free(n) for n in nodes]):
                k += 1
            out.setdefault(cl.name, {})[rack] = k
    return out


def judge(f: Fleet, w: Workload, plan) -> dict[str, int]:
    """Every share's groups inside racks (per rack, as many leaders as workers: one of each per
    group of size 2, no group across racks), the share's choices naming its copy's gangs; returns
    the shares."""
    labels = {n.name: n.labels.get(RACK) for cl in f.clusters for n in cl.nodes}
    shares = {}
    for p in plan.placements:
        per: dict[str | None, dict[str, int]] = {}
        for node, counts in p.nodes.items():
            for inst, k in counts.items():
                slot = per.setdefault(labels[node], {})
                slot[inst.split("/")[0]] = slot.get(inst.split("/")[0], 0) + k
        assert None not in per, f"pods on a node without {RACK}: {p.nodes}"
        assert all(c.get("leader", 0) == c.get("worker", 0) for c in per.values()), (p.cluster, per)
        assert sum(c["leader"] for c in per.values()) == p.replicas
        # one required choice per group of the share, named as the copy's groups, one domain each
        assert sorted(c.gang for c in p.topology) == [f"serve-{i}" for i in range(p.replicas)], p.topology
        chosen: dict[str, int] = {}
        for c in p.topology:
            assert c.key == RACK and c.required and len(c.domains) == 1
            chosen[c.domains[0]] = chosen.get(c.domains[0], 0) + 1
        assert chosen == {r: c["leader"] for r, c in per.items()}, (chosen, per)
        shares[p.cluster] = p.replicas
    return shares


def test_divided_groups_keep_their_rack():
    # east: two racks of one node with 4 GPUs free each, so a group (2 x 4 GPUs) fits east only
    # across racks; west: one rack of 2 nodes x 8 GPUs (2 groups), one node unlabelled (1 group
    # by GPUs, none by rack). Topology-blind, 3 groups fit (east 1, west 2, or west 3).
    f = fleet(cluster("east", f"1x8 used=4 {RACK}=e1", f"1x8 used=4 {RACK}=e2"),
              cluster("west", f"2x8 {RACK}=w1", "1x8"))
    w = interpret(lws(3, 4, spread_min_replicas="1"), CATALOG)
    assert w.scaling.unit.gangs and w.scaling.unit_gangs == ("serve-0", "serve-1", "serve-2")
    plan = solve(f, [PlacementGroup("g", (w,))])
    rooms = groups_per_rack(f, w.scaling.unit)
    assert rooms == {"east": {"e1": 0, "e2": 0}, "west": {"w1": 2}}
    assert judge(f, w, plan) == {"west": 2}
    assert plan.summary.gpus_placed == 16


def test_shares_on_two_clusters_each_in_racks_and_handed_off():
    # east: racks e1 (1 group) and e2 (1 group); west: rack w1 (2 groups); 4 groups: all placed,
    # 2 per cluster, every group in one rack
    f = fleet(cluster("east", f"1x8 {RACK}=e1", f"1x8 {RACK}=e2", f"1x8 used=4 {RACK}=e3"),
              cluster("west", f"2x8 {RACK}=w1"))
    w = interpret(lws(4, 4), CATALOG)
    plan = solve(f, [PlacementGroup("g", (w,))])
    rooms = groups_per_rack(f, w.scaling.unit)
    assert sum(sum(r.values()) for r in rooms.values()) == 4
    assert judge(f, w, plan) == {"east": 2, "west": 2}
    # the copy for east names its groups' racks: its gangs are serve-0 and serve-1
    east = next(p for p in plan.placements if p.cluster == "east")
    copy_ = share_object(w.obj, w.scaling, east.replicas)
    out = hand_off_topology(copy_, CATALOG, east.topology)
    terms = out["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {"key": RACK, "operator": "In", "values": ["e1", "e2"]} in terms[0]["matchExpressions"]


def test_topology_on_a_gang_spanning_the_shares_is_refused_in_one_line():
    ray = _no_selectors(copy.deepcopy(example("rayservice.yaml", "RayService")))
    ray["spec"]["rayClusterConfig"]["workerGroupSpecs"][0].update(replicas=4, minReplicas=0, maxReplicas=8)
    ray["metadata"]["annotations"] = {"placer.dev/spread": "divide", "placer.dev/topology-required": RACK}
    with pytest.raises(InputError) as e:
        interpret(ray, CATALOG)
    assert "asks for topology example.com/rack but spans its shares" in str(e.value)
    assert "\n" not in str(e.value)
