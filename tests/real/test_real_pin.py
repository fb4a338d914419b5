"""Pinning (`steer: pinned`, issue 22) judged by a real kube-apiserver, kube-controller-manager
(the Job controller makes the pods from the copy's template) and kube-scheduler on KWOK nodes,
with the daemon placing two Jobs staged on a hub.

The overlap case: nodes X (4 GPUs, 32 CPUs, labelled) and Y (4 GPUs, 8 CPUs). Job `a-spread`
(3 pods x 2 GPUs) and Job `b-shared` (1 pod x 2 GPUs, node selector: only X) fill both nodes
exactly, so the plan is forced: b on X, a once on X and twice on Y. Steered `required`, a's
template may take X or Y for each pod; its pods are scheduled before b's copy exists (a wrapper
around the apply waits for that, as a loaded cluster schedules an earlier copy first), and the
default scheduler's LeastAllocated score (CPU and memory, not GPUs) puts two of them on the
larger X: b's pod stays Pending with `Insufficient nvidia.com/gpu`. `pinned`: each pod arrives
gated and the daemon pins it to one planned node whose count is free: every pod binds, with the
plan's counts per node."""
from __future__ import annotations

from collections import Counter

import pytest

from placer import actuate as A
from placer.actuate.steer import ANN_PINNED, PIN_GATE, counts_of
from placer.daemon import Daemon, DaemonConfig, FakeClock, LeaseTiming
from placer.definitions.catalog import load_catalog
from placer.inputs.clusters_file import ClusterEntry
from placer.kube import Kube, RetryPolicy
from tests.kubeenv import require_binaries, wait_for

pytestmark = pytest.mark.kube

JOB_PODS = "batch.kubernetes.io/job-name"
SHARED = "example.com/shared"


@pytest.fixture(scope="module")
def hub_east(tmp_path_factory):
    from tests.kubeenv import RealKube

    require_binaries()
    env = RealKube(tmp_path_factory.mktemp("pin"), ("hub", "east"), hub="hub")
    yield env
    env.down()


def job(name: str, ns: str, pods: int, gpus: int, selector: dict | None = None) -> dict:
    resources = {"requests": {"cpu": "2", "memory": "4Gi", "nvidia.com/gpu": str(gpus)},
                 "limits": {"nvidia.com/gpu": str(gpus)}}
    spec: dict = {"restartPolicy": "Never", "containers": [
        {"name": "train", "image": "registry.example/train:1", "resources": resources}]}
    if selector:
        spec["nodeSelector"] = selector
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "namespace": ns},
            "spec": {"suspend": True, "completionMode": "Indexed", "completions": pods, "parallelism": pods,
                     "backoffLimit": 0, "template": {"spec": spec}}}


def settled(pod: dict) -> bool:
    """Bound, judged unschedulable, or held by a scheduling gate."""
    conditions = (pod.get("status") or {}).get("conditions") or ()
    return bool(pod["spec"].get("nodeName")) or any(
        c["type"] == "PodScheduled" and c["status"] == "False" and c.get("reason") in ("Unschedulable",
                                                                                      "SchedulingGated")
        for c in conditions) or bool(pod["spec"].get("schedulingGates"))


@pytest.fixture
def in_order(hub_east, monkeypatch):
    """Each copy's pods settled before the next copy is created (on the cluster's queue)."""
    env = hub_east
    apply = A.apply_group

    def apply_then_settle(client, objects, **kwargs):
        out = apply(client, objects, **kwargs)
        for o in objects:
            if o["kind"] == "Job":
                ns, name, count = o["metadata"]["namespace"], o["metadata"]["name"], o["spec"]["parallelism"]

                def done(ns=ns, name=name, count=count):
                    pods = env.pods("east", ns, f"{JOB_PODS}={name}")
                    return len(pods) == count and all(settled(p) for p in pods)
                wait_for(done, 120, f"the pods of {name} settled", interval=0.2)
        return out
    monkeypatch.setattr(A, "apply_group", apply_then_settle)
    return env


def run(env, steer: str) -> tuple[str, dict[str, dict]]:
    """Stage both Jobs, then start the daemon (one round plans both); the copies by name."""
    env.wipe("east")
    ns = env.unique(f"pin-{steer}")
    env.namespace("hub", ns)
    tag = ns[-6:].replace("-", "")
    env.nodes("east", count=1, prefix=f"x{tag}-", gpus=4, cpu=32, memory="64Gi", kwok=True,
              label=[f"{SHARED}=yes"])
    env.nodes("east", count=1, prefix=f"y{tag}-", gpus=4, cpu=8, memory="16Gi", kwok=True)
    hub = env.client("hub")
    hub.create("jobs", job("a-spread", ns, 3, 2), ns)
    hub.create("jobs", job("b-shared", ns, 1, 2, {SHARED: "yes"}), ns)
    config = DaemonConfig(staging_namespace=ns, hub_context="hub", batch_window=0.05, time_limit=5.0,
                          clusters=(ClusterEntry(name="east", context="east", steer=steer),), watch_retry=0.2,
                          lease=LeaseTiming(duration=6.0, renew_deadline=4.0, retry_period=0.5))
    kube = Kube(str(env.kubeconfig), retry=RetryPolicy(attempts=3, base=0.05, cap=0.5), timeout=10)
    daemon = Daemon(config, kube, load_catalog(), clock=FakeClock()).start()
    env.daemon = daemon
    east = env.client("east")
    try:
        copies = wait_for(lambda: (lambda c: c if len(c) == 2 else None)(
            {o["metadata"]["name"]: o for o in east.list("jobs", ns).items}), 120, "both copies on east")
    except BaseException:
        daemon.stop()
        raise
    return ns, copies


def placed(env, ns: str) -> dict[str, Counter]:
    out: dict[str, Counter] = {}
    for p in env.pods("east", ns):
        out.setdefault(p["metadata"]["labels"][JOB_PODS], Counter())[p["spec"].get("nodeName")] += 1
    return out


def test_required_steering_lets_the_scheduler_pair_overlapping_templates_wrongly(in_order):
    env = in_order
    ns, copies = run(env, "required")
    try:
        assert counts_of(copies["a-spread"]) == {}              # required records no counts
        (stuck,) = env.wait_unschedulable("east", ns, timeout=120)
        assert stuck["metadata"]["labels"][JOB_PODS] == "b-shared"
        message = next(c["message"] for c in stuck["status"]["conditions"] if c["type"] == "PodScheduled")
        assert "Insufficient nvidia.com/gpu" in message
        on = placed(env, ns)["a-spread"]
        (x,) = [n for n in on if n and n.startswith("x")]
        assert on[x] == 2                                       # the plan had one of a's pods there
        assert "schedulingGates" not in copies["a-spread"]["spec"]["template"]["spec"]
    finally:
        env.daemon.stop()


def test_pinned_binds_every_pod_on_its_planned_node_with_the_plans_counts(in_order):
    env = in_order
    ns, copies = run(env, "pinned")
    try:
        for name, copy in copies.items():
            assert copy["spec"]["template"]["spec"]["schedulingGates"] == [{"name": PIN_GATE}]
        plan = {name: counts_of(copy)[next(iter(counts_of(copy)))] for name, copy in copies.items()}
        assert sorted(plan["a-spread"].values()) == [1, 2] and list(plan["b-shared"].values()) == [1]
        pods = env.wait_bound("east", ns, 4, timeout=120)
        assert placed(env, ns) == {name: Counter(c) for name, c in plan.items()}
        for p in pods:
            assert p["metadata"]["annotations"][ANN_PINNED] == p["spec"]["nodeName"]
            assert not p["spec"].get("schedulingGates")
    finally:
        env.daemon.stop()
