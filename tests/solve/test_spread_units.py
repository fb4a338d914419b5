"""Divide with gang units and a fixed part, through the real catalog (issue 21): a LeaderWorkerSet
share is whole groups (never a partial gang), a RayService share carries its own head."""

import copy
from pathlib import Path

import yaml

from placer.definitions.catalog import load_catalog
from placer.definitions.interpret import interpret
from placer.model.workload import PlacementGroup
from placer.solve import solve
from tests.builders import fleet

ROOT = Path(__file__).resolve().parents[2]
CATALOG = load_catalog()


def example(name: str, kind: str) -> dict:
    return next(d for d in yaml.safe_load_all((ROOT / "examples" / name).read_text()) if d and d["kind"] == kind)


def _no_selectors(obj):
    if isinstance(obj, dict):
        obj.pop("nodeSelector", None)
        for v in obj.values():
            _no_selectors(v)
    elif isinstance(obj, list):
        for v in obj:
            _no_selectors(v)
    return obj


def test_leaderworkerset_shares_are_whole_groups():
    lws = _no_selectors(copy.deepcopy(example("leaderworkerset.yaml", "LeaderWorkerSet")))
    lws["spec"]["replicas"] = 4
    lws["metadata"]["annotations"] = {"placer.dev/spread": "divide", "placer.dev/spread-min-replicas": "3"}
    w = interpret(lws, CATALOG)
    assert w.scaling.units == 4 and w.scaling.unit.pods == 2 and w.scaling.unit_name.startswith("group")
    # east: 3 nodes with 4 GPUs free hold 3 of the 4-GPU pods, one whole group; west holds 2 groups
    f = fleet("east: 3x8 used=4", "west: 2x8")
    plan = solve(f, [PlacementGroup("g", (w,))])
    got = {p.cluster: (p.replicas, p.pods) for p in plan.placements}
    assert got == {"east": (1, 2), "west": (2, 4)}, got


def test_rayservice_share_carries_its_head():
    ray = _no_selectors(copy.deepcopy(example("rayservice.yaml", "RayService")))
    group = ray["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]
    group.update(replicas=4, minReplicas=0, maxReplicas=8)
    ray["metadata"]["annotations"] = {"placer.dev/spread": "divide"}
    w = interpret(ray, CATALOG)
    assert w.scaling.units == 4 and w.scaling.fixed.pods == 1 and w.scaling.unit.gpus == 2
    # each cluster holds 2 of the 2-GPU workers (4 GPUs free) and a head: 2 and 2, a head each
    f = fleet("east: 1x8 used=4", "west: 1x8 used=4")
    plan = solve(f, [PlacementGroup("g", (w,))])
    got = {p.cluster: p for p in plan.placements}
    assert {c: p.replicas for c, p in got.items()} == {"east": 2, "west": 2}
    for p in got.values():
        per = {}
        for counts in p.nodes.values():
            for inst, n in counts.items():
                per[inst] = per.get(inst, 0) + n
        assert per == {"head/headgroup": 1, "workerGroup/gpu": 2}, per
        assert p.pods == 3 and p.gpus == 4
