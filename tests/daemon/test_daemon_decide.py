"""The daemon's decisions without any API server: snapshots and workloads from
tests/builders.py, expectations worked out by hand from the fleet's free GPUs."""

from __future__ import annotations

from placer.daemon import decide as DC
from placer.daemon.reschedule import judge, reschedule_after
from placer.model.workload import PlacementGroup
from tests.builders import cluster, fleet, group, wl


def pending(*workloads, excluded=(), pin=None, key=None) -> DC.PendingGroup:
    g = group(*workloads, key=key)
    return DC.PendingGroup(g, tuple(w.ref for w in workloads), frozenset(excluded), pin)


def creates(d: DC.Decision) -> dict[str, str]:
    return {c.group: c.cluster for c in d.creates}


def test_a_pending_group_is_created_where_it_fits_and_the_rest_say_why_not():
    snap = DC.Snapshot(fleet("east: 2x8 used=6", "west: 1x8"))       # east: 2 + 2 free GPUs, west: 8
    a = wl("ml/a", "3x4")                                              # 12 GPUs: more than any cluster has free
    b = wl("ml/b", "1x8")
    c = wl("ml/c", "1x2")
    d = DC.decide(snap, [pending(a), pending(b), pending(c)], now=0.0, plan_id="p1")
    placed = creates(d)
    # b takes west whole, c two of east.s four free GPUs; a fits nowhere
    assert placed == {"ml/b": "west", "ml/c": "east"}
    [u] = d.unplaced
    assert u.ref == a.ref and u.reason.startswith("unplaced: ") and "east: " in u.reason and "west: " in u.reason
    create_b = next(x for x in d.creates if x.group == "ml/b")
    assert create_b.members == (b.ref,)
    assert create_b.messages[b.ref] == "placed on west by plan p1: 1 pod on 1 node"


def test_a_cluster_that_refused_a_workload_is_left_out_for_it():
    snap = DC.Snapshot(fleet("east: 1x8", "west: 1x8"))
    w = wl("ml/w", "1x8")
    first = creates(DC.decide(snap, [pending(w)], now=0.0))["ml/w"]
    other = {"east": "west", "west": "east"}[first]
    again = DC.decide(snap, [pending(w, excluded={first})], now=1.0)
    assert creates(again) == {"ml/w": other}
    # excluded on the only cluster with room: unplaced, saying so for that cluster
    none = DC.decide(DC.Snapshot(fleet(f"{first}: 1x8", f"{other}: 1x4")), [pending(w, excluded={first})], now=2.0)
    assert creates(none) == {} and f"{first}: " in none.unplaced[0].reason


def test_a_newcomer_to_a_placed_group_is_pinned_to_the_groups_cluster():
    snap = DC.Snapshot(fleet("east: 1x8", "west: 4x8"))
    w = wl("ml/late", "1x2")
    assert creates(DC.decide(snap, [pending(w, pin="east")], now=0.0)) == {"ml/late": "east"}
    full = DC.Snapshot(fleet("east: 1x8 used=8", "west: 4x8"))
    d = DC.decide(full, [pending(w, pin="east")], now=0.0)
    assert creates(d) == {} and "pinned to east" in d.unplaced[0].reason


def test_promised_demand_takes_its_capacity_first():
    snap = DC.Snapshot(fleet("east: 1x8", "west: 1x8"))
    promised = (group(wl("ml/placed", "1x8"), key="promised:east/ml/placed"), "east")
    w = wl("ml/new", "1x8")
    assert creates(DC.decide(DC.Snapshot(snap.fleet, (promised,)), [pending(w)], now=0.0)) == {"ml/new": "west"}
    both = ((group(wl("ml/p2", "1x8"), key="promised:west/ml/p2"), "west"), promised)
    d = DC.decide(DC.Snapshot(snap.fleet, both), [pending(w)], now=0.0)
    assert creates(d) == {} and len(d.unplaced) == 1


def test_an_unreachable_cluster_is_never_chosen():
    snap = DC.Snapshot(fleet(cluster("east", "4x8", error="unreachable (connection refused)"), "west: 1x8"))
    d = DC.decide(snap, [pending(wl("ml/a", "1x8")), pending(wl("ml/b", "1x8"))], now=0.0)
    assert sorted(creates(d).values()) == ["west"]
    assert "east: unreachable" in d.unplaced[0].reason


def test_a_group_lands_whole_or_not_at_all():
    snap = DC.Snapshot(fleet("east: 1x8", "west: 1x8"))
    a, b = wl("ml/a", "1x8"), wl("ml/b", "1x4")                    # 12 GPUs: no single cluster has them
    d = DC.decide(snap, [pending(a, b, key="ml/pair")], now=0.0)
    assert creates(d) == {} and {u.ref for u in d.unplaced} == {a.ref, b.ref}


def test_no_pending_no_plan():
    d = DC.decide(DC.Snapshot(fleet("east: 1x8")), [], now=0.0)
    assert d.actions == () and d.plan is None


def test_a_deleted_copy_of_a_finished_workload_is_not_run_again():
    for phase in ("Completed", "Failed"):
        gone = DC.on_copy_gone("east", phase)
        assert not gone.replace and "not run again" in gone.reason
    for phase in ("Running", "Pending", None):
        gone = DC.on_copy_gone("east", phase)
        assert gone.replace and "placing it again" in gone.reason


def test_drift_is_only_about_fields_placer_sets():
    desired = {"spec": {"suspend": False, "replicatedJobs": [{"name": "w", "replicas": 1}]}}
    same_plus_defaults = {"spec": {"suspend": False, "replicatedJobs": [{"name": "w", "replicas": 1, "x": 2}],
                                   "managedBy": "someone"}}
    assert DC.drifted(desired, same_plus_defaults) == []
    edited = {"spec": {"suspend": True, "replicatedJobs": [{"name": "w", "replicas": 3}]}}
    assert DC.drifted(desired, edited) == ["replicatedJobs", "suspend"]
    assert DC.drifted(desired, {"spec": {"suspend": False}}) == ["replicatedJobs"]


def test_a_spec_edit_is_checked_for_fit_in_the_room_the_old_version_leaves():
    # east: two 8-GPU nodes, the workload's own pods already hold one of them (left out here)
    east = cluster("east", "1x8", "1x8 used=8")
    room = cluster("east", "2x8")                                    # its own pods taken out
    bigger = wl("ml/train", "2x8")
    assert not DC.edit_fits(east, bigger).fits
    assert DC.edit_fits(room, bigger).fits
    huge = wl("ml/train", "4x8")
    fit = DC.edit_fits(room, huge)
    assert not fit.fits and "8" in fit.reason
    # what others are promised on the cluster counts too
    other = (PlacementGroup("promised:east/ml/o", (wl("ml/o", "1x8"),)), "east")
    assert not DC.edit_fits(room, bigger, [other]).fits


def test_reschedule_judgement():
    assert judge("Pending", placed_at=0, now=50, after=60, running=0, pods=2) == DC_verdict(False, 60)
    v = judge("Pending", placed_at=0, now=61, after=60, running=1, pods=2)
    assert v.withdraw and v.why == "1 of 2 pods not running after 60s"
    assert not judge("Pending", placed_at=0, now=61, after=60, running=2, pods=2).withdraw
    assert not judge("Running", placed_at=0, now=1e6, after=60, running=0, pods=2).withdraw
    assert not judge("Pending", placed_at=0, now=1e6, after=None, running=0, pods=2).withdraw
    ann = lambda v: {"metadata": {"annotations": {"placer.dev/reschedule": v}}}
    assert reschedule_after(ann("false"), 30.0) is None
    assert reschedule_after(ann("true"), None) == 600.0 and reschedule_after(ann("true"), 30.0) == 30.0
    assert reschedule_after({}, None) is None and reschedule_after({}, 45.0) == 45.0


def DC_verdict(withdraw, recheck_at):
    from placer.daemon.reschedule import Verdict
    return Verdict(withdraw, recheck_at)


def test_node_labels_no_workload_can_tell_apart_do_not_change_the_plan():
    """Each node's own hostname label (as live nodes have) is cut before solving; labels a
    selector, an affinity term or a topology level names are kept, so plans stay the same."""
    import dataclasses

    from placer.model.fleet import Fleet

    base = fleet("east: 4x8 gpu=h100 | 2x8 gpu=a100", "west: 3x8 gpu=a100")
    live = Fleet(tuple(dataclasses.replace(c, nodes=tuple(
        dataclasses.replace(n, labels={**n.labels, "kubernetes.io/hostname": n.name}) for n in c.nodes))
        for c in base.clusters), base.taken_at)
    kept = DC.relevant_labels(live, {"gpu"})
    assert all(set(n.labels) == {"gpu"} for c in kept.clusters for n in c.nodes)
    assert DC.relevant_labels(live, {"gpu", "kubernetes.io/hostname"}) == live
    work = [pending(wl("ml/h", "3x8 gpu=h100")), pending(wl("ml/a", "3x8 gpu=a100")),
            pending(wl("ml/any", "1x8"))]
    assert DC.label_keys([w for p in work for w in p.group.workloads]) == {"gpu"}
    with_hosts = DC.decide(DC.Snapshot(live), work, now=0.0)
    without = DC.decide(DC.Snapshot(base), work, now=0.0)
    assert creates(with_hosts) == creates(without) == {"ml/h": "east", "ml/a": "west", "ml/any": "east"}
    assert [u.ref for u in with_hosts.unplaced] == [u.ref for u in without.unplaced]
    # a workload that selects on the hostname keeps it, and lands on that very node
    pinned = pending(wl("ml/one", "1x8", selector=None))
    one = dataclasses.replace(pinned.group.workloads[0], instances=tuple(
        dataclasses.replace(i, pod=dataclasses.replace(i.pod, node_selector={"kubernetes.io/hostname": "west-0-1"}))
        for i in pinned.group.workloads[0].instances))
    d = DC.decide(DC.Snapshot(live), [pending(one)], now=0.0)
    assert creates(d) == {"ml/one": "west"} and list(d.plan.placements[0].nodes) == ["west-0-1"]
