"""benchmarks/peers_replay.py's pure parts, on a hand-made trace with hand-computed figures: which
tasks become arrivals, when they arrive and how long they run, and the wait, percentile, burst-rate
and GPUs-held counting the replay reports (the cluster runs themselves are benchmarks)."""
from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET

from benchmarks import peers_aggregate as agg
from benchmarks import peers_replay as pr


def row(name: str, gpus: int, created: int, deleted: int) -> dict:
    return {"name": name, "cpu_milli": "4000", "memory_mib": "15258", "num_gpu": str(gpus),
            "creation_time": str(created), "deletion_time": str(deleted)}


TRACE = [row("p0", 0, 50, 60),            # no GPU: never an arrival
         row("p1", 1, 90, 190),           # before the start
         row("p3", 2, 100, 105),          # same second as p2: p2 first (by name)
         row("p2", 1, 100, 400),
         row("p4", 8, 300, 100300),
         row("p5", 4, 500, 1000),
         row("p6", 1, 900, 950)]          # beyond the count


def replay(high_share: float = 0.0) -> list[pr.Arrival]:
    return pr.arrivals(TRACE, start=100, count=4, burst=2, arrival_factor=10, duration_factor=10,
                       min_run=1, max_run=60, high_share=high_share, seed=1)


def test_trace_rows_become_arrivals_at_compressed_times_with_clipped_runs():
    got = [(a.name, a.task, a.at, a.run_for, a.gpus, a.cpu_m, a.memory_mi, a.priority) for a in replay()]
    assert got == [("t0000", "p2", 0.0, 30.0, 1, 4000, 15258, pr.NORMAL),     # burst; 300 s / 10
                   ("t0001", "p3", 0.0, 1.0, 2, 4000, 15258, pr.NORMAL),      # burst; 0.5 s clipped up to 1
                   ("t0002", "p4", 20.0, 60.0, 8, 4000, 15258, pr.NORMAL),    # (300-100)/10; 10000 s clipped to 60
                   ("t0003", "p5", 40.0, 50.0, 4, 4000, 15258, pr.NORMAL)]    # (500-100)/10; 500 s / 10


def test_high_share_sets_the_priority():
    assert {a.priority for a in replay(1.0)} == {pr.HIGH}
    assert pr.arrivals(TRACE, start=10_000, count=4, burst=0, arrival_factor=1, duration_factor=1, min_run=1,
                       max_run=9, high_share=0, seed=1) == []


def test_waits_percentiles_and_burst_rate_by_hand():
    arrived = replay()
    arrived[2] = dataclasses.replace(arrived[2], priority=pr.HIGH)
    bound_at = {"t0000": 2.0, "t0001": 5.0, "t0002": 21.5}           # t0003 never bound
    assert pr.waits(arrived, bound_at) == {"t0000": 2.0, "t0001": 5.0, "t0002": 1.5}
    s = pr.stats(arrived, bound_at)
    assert (s.workloads, s.bound, s.p50, s.p95) == (4, 3, 2.0, 5.0)   # nearest rank of 1.5, 2, 5
    assert abs(s.mean - 8.5 / 3) < 1e-9
    high = pr.stats(arrived, bound_at, pr.HIGH)
    assert (high.workloads, high.bound, high.p95) == (1, 1, 1.5)
    normal = pr.stats(arrived, bound_at, pr.NORMAL)
    assert (normal.workloads, normal.bound, normal.p50, normal.p95) == (3, 2, 2.0, 5.0)
    assert pr.burst_rate(arrived, bound_at, 2) == 2 / 5.0             # 2 of the burst, the last at 5 s
    assert pr.burst_rate(arrived, {}, 2) is None


def test_percentile_is_nearest_rank():
    values = [float(v) for v in range(20, 0, -1)]
    assert pr.percentile(values, 95) == 19.0
    assert pr.percentile(values, 50) == 10.0
    assert pr.percentile(values, 100) == 20.0
    assert pr.percentile([], 95) is None


def pod(node: str | None, phase: str, gpus: int) -> dict:
    return {"spec": {"nodeName": node, "containers": [{"resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}]},
            "status": {"phase": phase}}


def test_gpus_held_count_bound_unfinished_pods_only():
    pods = [pod("n1", "Running", 2), pod("n1", "Succeeded", 8), pod(None, "Pending", 4), pod("n2", "Pending", 1),
            pod("n2", "Failed", 3)]
    assert pr.held_gpus(pods) == 3
    assert pr.gpu_seconds([(0.0, 0), (1.0, 2), (3.0, 4), (4.0, 0)]) == 8.0


def test_replay_manifest_completes_and_names_its_priority():
    a = dataclasses.replace(replay()[0], priority=pr.HIGH)
    m = pr.replay_manifest(a, "ns", {"kueue.x-k8s.io/queue-name": "kube-env"})
    template = m["spec"]["template"]
    assert template["metadata"]["annotations"] == {pr.COMPLETE: "30s"}
    assert template["spec"]["priorityClassName"] == pr.HIGH
    assert m["spec"]["suspend"] is True and m["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "kube-env"}


def test_svg_draws_one_line_per_system_and_the_capacity():
    root = ET.fromstring(pr.svg({"placer": [(0.0, 0), (10.0, 5)], "multikueue": [(0.0, 0), (20.0, 3)]}, 8, "t"))
    ns = "{http://www.w3.org/2000/svg}"
    assert len(root.findall(f"{ns}polyline")) == 2
    assert any(t.text == "fleet 8" for t in root.iter(f"{ns}text"))


def test_demand_without_wait_by_hand():
    demand = dict(pr.offered(replay()))      # 1 GPU 0-30 s, 2 GPUs 0-1 s, 8 GPUs 20-80 s, 4 GPUs 40-90 s
    assert (demand[0.0], demand[1.0], demand[20.0], demand[30.0], demand[40.0], demand[80.0], demand[90.0]) == \
        (3, 1, 9, 8, 12, 4, 0)
    assert max(demand) == 91.0


def test_redraw_draws_each_system_and_the_demand_from_a_runs_json(tmp_path):
    arrived = replay()
    source = tmp_path / "replay.json"
    source.write_text(json.dumps({"capacity": 8, "arrivals": [a.__dict__ for a in arrived],
                                                "systems": {"placer": {"series": [[0, 0], [5, 3]]},
                                                            "multikueue": {"series": [[0, 0], [9, 1]]}}}))
    assert pr.redraw(source, tmp_path / "r.svg") == 0
    root = ET.parse(tmp_path / "r.svg").getroot()
    names = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert {"placer", "multikueue", "demand (no wait)", "fleet 8"} <= set(names)


# --- the aggregate greedy over time ------------------------------------------------------------

POOLS = [agg.Pool("w0", "w0-a", 2, 4, "A"),      # w0: 2 nodes x 4 GPUs
         agg.Pool("w1", "w1-b", 1, 8, "B"),      # w1: 1 node x 8 GPUs
         agg.Pool("w1", "w1-c", 2, 1, "C")]      # and 2 nodes x 1 GPU


def job_pod(job: str, node: str | None, phase: str, gpus: int) -> dict:
    p = pod(node, phase, gpus)
    p["metadata"] = {"labels": {"batch.kubernetes.io/job-name": job}}
    return p


def test_aggregate_free_counts_live_pods_pending_ones_and_creates_not_yet_listed():
    pods = {"w0": [job_pod("t0", "w0-a-0", "Running", 3),      # w0-a: 8 - 3
                   job_pod("t1", "w0-a-1", "Succeeded", 4),    # finished: frees its GPUs
                   job_pod("t2", None, "Pending", 2)],         # unbound: from w0's largest pool, 5 - 2
            "w1": [job_pod("t3", "w1-c-1", "Running", 1)]}     # w1-c: 2 - 1
    created = {"t0": ("w0", 3), "t2": ("w0", 2), "t3": ("w1", 1),
               "t4": ("w1", 6)}                                # created, no pod listed yet: w1-b 8 - 6
    assert agg.free_now(POOLS, pods, created) == {("w0", "A", None): 3, ("w1", "B", None): 2,
                                                       ("w1", "C", None): 1}


def test_aggregate_round_places_in_arrival_order_onto_the_most_free_total_and_skips_what_fits_nowhere():
    a = [pr.Arrival(f"t{i}", f"p{i}", 0.0, 10.0, g, 1000, 1024) for i, g in enumerate((4, 5, 3, 1, 1))]
    free = {("w0", "A", None): 4, ("w0", "A2", None): 2, ("w1", "B", None): 5}
    got = [(x.name, w) for x, w in agg.round_of(a, free, ["w0", "w1"], pr.load_of)]
    # totals w0 6, w1 5: t0 (4) -> w0 (6 -> 2); t1 (5) -> w1 (5 -> 0); t2 (3) fits no total (2, 0):
    # stays queued; t3 (1) -> w0 (2 -> 1); t4 (1) -> w0 (1 -> 0, w1 has 0)
    assert got == [("t0", "w0"), ("t1", "w1"), ("t3", "w0"), ("t4", "w0")]
    assert free == {("w0", "A", None): 0, ("w0", "A2", None): 0, ("w1", "B", None): 0}


def test_aggregate_round_uses_capacity_freed_by_a_finished_pod():
    waiting = [pr.Arrival("t9", "p9", 5.0, 10.0, 8, 1000, 1024)]
    busy = {"w0": [job_pod("t6", "w0-a-0", "Running", 1)], "w1": [job_pod("t5", "w1-b-0", "Running", 8)]}
    assert agg.round_of(waiting, agg.free_now(POOLS, busy, {}), ["w0", "w1"], pr.load_of) == []  # totals 7 and 2
    busy["w1"][0]["status"]["phase"] = "Succeeded"                                               # w1: 10
    assert [(x.name, w) for x, w in agg.round_of(waiting, agg.free_now(POOLS, busy, {}), ["w0", "w1"],
                                                 pr.load_of)] == [("t9", "w1")]


def test_the_run_ends_when_every_task_finished_not_a_settle_after_the_last_placement():
    arrived = replay()        # arrivals at 0, 0, 20, 40; runs 30, 1, 60, 50 s
    bound_at = {"t0000": 2.0, "t0001": 5.0, "t0002": 21.5, "t0003": 45.0}
    # all bound at 45 s, t0002 runs until 81.5 s: settle 10 after the last placement is no end
    assert not pr.over(56.0, arrived, bound_at, held=12, last_bound=45.0, settle=10)
    assert pr.over(82.0, arrived, bound_at, held=0, last_bound=45.0, settle=10)
    # a pod never completed: 10 s after the last should have finished (t0003 at 95 s)
    assert not pr.over(104.0, arrived, bound_at, held=4, last_bound=45.0, settle=10)
    assert pr.over(105.5, arrived, bound_at, held=4, last_bound=45.0, settle=10)
    # t0003 never bound: settle after the last arrival (40 s) and the last placement (21.5 s)
    partial = {k: v for k, v in bound_at.items() if k != "t0003"}
    assert not pr.over(49.0, arrived, partial, held=9, last_bound=21.5, settle=10)
    assert pr.over(50.5, arrived, partial, held=9, last_bound=21.5, settle=10)
