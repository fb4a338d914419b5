"""Storage inside "fits" (issue 25, item 8): a group whose claims cannot bind on a cluster (no
default StorageClass and none named, or a named class the cluster lacks) is kept off it with
that reason; every reason judged by tests/solve/oracle.py."""

from dataclasses import replace

import pytest

from placer.model import reasons as R
from placer.model.fleet import StorageClass
from placer.model.plan import Unplaced
from placer.model.workload import PlacementGroup
from placer.solve import solve
from tests.builders import cluster, fleet, group, wl
from tests.solve import oracle as O

T = 10


def classes(*names: str, default: str | None = None) -> dict[str, StorageClass]:
    return {n: StorageClass(n, n == default) for n in names}


def sim(name: str, storage=None):
    return replace(cluster(name, "2x8"), storage_classes=storage)


def statefulset(name: str, *storage: str | None) -> PlacementGroup:
    """A StatefulSet `ml/name` of 1 pod x 1 GPU with one volumeClaimTemplate per class given."""
    tpls = [{"metadata": {"name": f"data{i}"}, "spec": {"resources": {"requests": {"storage": "1Gi"}},
                                                        **({"storageClassName": sc} if sc is not None else {})}}
            for i, sc in enumerate(storage)]
    w = replace(wl(f"ml/{name}", "1x1", kind="StatefulSet"),
                obj={"kind": "StatefulSet", "spec": {"replicas": 1, "volumeClaimTemplates": tpls}})
    return group(w)


def mounting(name: str, claim: str, storage: str | None) -> PlacementGroup:
    """A workload whose pod template mounts PVC `claim`, carried with it as a companion."""
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": claim, "namespace": "ml"},
           "spec": {"resources": {"requests": {"storage": "1Gi"}},
                    **({"storageClassName": storage} if storage is not None else {})}}
    spec = {"template": {"spec": {"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": claim}}]}}}
    w = replace(wl(f"ml/{name}", "1x1", kind="Job"), obj={"kind": "Job", "spec": spec})
    return PlacementGroup(w.key, (w,), companions=(pvc,))


def plan_of(f, gs):
    plan = solve(f, gs, time_limit=T, workers=1)
    assert not O.false_reasons(f, gs, plan), O.false_reasons(f, gs, plan)
    return plan


def test_claims_without_a_class_need_a_default():
    f = fleet(sim("nodefault", classes("slow")), sim("unknown"), sim("withdefault", classes("fast", default="fast")))
    gs = [statefulset("db", None)]
    plan = plan_of(f, [*gs, group(wl("ml/fill", "2x8", prio=9, pin="unknown")),
                       group(wl("ml/fill2", "2x8", prio=9, pin="withdefault"))])
    r = plan.unplaced_entry("ml/db").reasons
    assert r["nodefault"] == R.UnboundClaim("data0", None)
    assert r["nodefault"].render() == ("claim data0 names no StorageClass and the cluster has no default StorageClass: "
                                       "its pods would stay Pending")
    # the others have room for it only if the fillers were not there: capacity, not storage
    assert r["unknown"].code == r["withdefault"].code == "CapacityTaken"


def test_a_named_class_must_exist():
    f = fleet(sim("east", classes("standard", default="standard")), sim("west", classes("fast-ssd")))
    plan = plan_of(f, [statefulset("db", "fast-ssd")])
    assert [p.cluster for p in plan.placements] == ["west"]
    plan = plan_of(f, [statefulset("db", "fast-ssd", "archive")])
    r = plan.unplaced_entry("ml/db").reasons
    assert r["east"] == R.UnboundClaim("data0", "fast-ssd")
    assert r["west"] == R.UnboundClaim("data1", "archive")
    assert r["west"].render() == ("claim data1 asks for StorageClass archive, which the cluster does not have: "
                                  "its pods would stay Pending")


def test_a_mounted_claim_carried_with_the_workload():
    f = fleet(sim("east", classes("standard", default="standard")), sim("west", classes("fast-ssd")))
    plan = plan_of(f, [mounting("train", "ckpt", "fast-ssd")])
    assert [p.cluster for p in plan.placements] == ["west"]
    plan = plan_of(f, [mounting("train", "ckpt", None)])
    assert [p.cluster for p in plan.placements] == ["east"]


@pytest.mark.parametrize("storage", ["", None])
def test_what_is_not_judged_places(storage):
    # `storageClassName: ""` binds to a PersistentVolume made beforehand: not judged; a cluster
    # whose classes are unknown (a simulated one declaring none) is not judged either
    f = fleet(sim("east", classes() if storage == "" else None))
    plan = plan_of(f, [statefulset("db", storage)])
    assert [p.cluster for p in plan.placements] == ["east"]


def test_the_claim_checker_catches_a_false_claim_reason():
    f = fleet(sim("east", classes("fast", default="fast")))
    gs = [statefulset("db", "slow"), statefulset("ok", "fast")]
    plan = plan_of(f, gs)
    assert plan.unplaced_entry("ml/db").reasons["east"] == R.UnboundClaim("data0", "slow")
    for lie in (R.UnboundClaim("data0", "fast"), R.UnboundClaim("data0", None), R.UnboundClaim("other", "slow")):
        u = plan.unplaced_entry("ml/db")
        bad = plan.__class__(plan.placements, (Unplaced(u.workload, u.kind, u.group, u.gpus, u.pods, u.priority,
                                                        {"east": lie}),), plan.summary)
        assert O.false_reasons(f, gs, bad), lie


def test_the_verifier_rejects_a_placement_whose_claims_cannot_bind():
    from placer.model.errors import VerificationError
    from placer.model.plan import Placement
    from placer.solve.verify import verify

    f = fleet(sim("east", classes("standard", default="standard")), sim("west", classes("fast-ssd")))
    gs = [statefulset("db", None)]
    plan = plan_of(f, gs)
    assert [p.cluster for p in plan.placements] == ["east"]
    moved = Placement("ml/db", "StatefulSet", "ml/db", "west", 1, 1, 0, {"west-0-0": {"c0/0": 1}})
    with pytest.raises(VerificationError, match="claim data0 of ml/db names no StorageClass"):
        verify(f, gs, replace(plan, placements=(moved,)))
