"""Scheduler fidelity: placer's verdict against the real kube-scheduler's, both ways.

For each case the cluster gets the case's nodes (and pods already bound to them), placer
plans the workload on it exactly as `placer submit --dry-run` would (live inventory through
placer's client), then the workload is forced onto the cluster: Job, Deployment,
StatefulSet and Pod through the real controller-manager, CRD kinds as the pods their
operator would create (tests/realkube/pods.py). Where placer places it, every pod must be
bound; where placer leaves it unplaced, at least one pod must stay unschedulable with the
scheduler's own reason. Each case also states which way it should go, so a case cannot
pass by both sides being wrong together.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from placer.definitions.catalog import load_catalog
from tests.realkube import manifests as M
from tests.realkube.cluster import BoundPod, NodeSpec
from tests.realkube.env import KubeEnv, unavailable
from tests.realkube.scenario import Pool, Scenario, Verdict

pytestmark = pytest.mark.kube

CLUSTERS = ("fid-a", "fid-b", "fid-c")
GPU = "nvidia.com/gpu"
OVERHEAD_RC = "fid-overhead"           # RuntimeClass with a pod overhead of 1 CPU and 1Gi
PLAIN_RC = "fid-plain"                 # RuntimeClass without overhead
POOL_RC = "fid-pool"                   # RuntimeClass whose scheduling selects pool=gpu and tolerates dedicated
RUNTIME_CLASSES = {
    OVERHEAD_RC: {"overhead": {"podFixed": {"cpu": "1", "memory": "1Gi"}}}, PLAIN_RC: None,
    POOL_RC: {"scheduling": {"nodeSelector": {"pool": "gpu"},
                             "tolerations": [{"key": "dedicated", "operator": "Exists"}]}}}


@pytest.fixture(scope="module")      # only this module's: down once it is done
def real_env(tmp_path_factory):
    why = unavailable()
    if why:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true needs real control planes: {why}")
        pytest.skip(f"real control planes unavailable: {why}")
    # PLACER_KUBE_DIR: a kube-env directory to reuse (started if needed, left running)
    keep = os.environ.get("PLACER_KUBE_DIR")
    env = KubeEnv.up(keep or tmp_path_factory.mktemp("kube-env"), CLUSTERS)
    yield env
    if not keep:
        env.down()


@pytest.fixture(scope="module")
def pool(real_env, tmp_path_factory) -> Pool:
    p = Pool(real_env.kubeconfig, real_env.names, load_catalog(), tmp_path_factory.mktemp("fidelity"))
    p.prepare(RUNTIME_CLASSES)
    return p


def node(name: str, gpus: int = 8, cpu: str = "16", memory: str = "64Gi", pods: str | None = "110",
         labels: dict | None = None, taints: tuple = (), unschedulable: bool = False) -> NodeSpec:
    alloc = {"cpu": cpu, "memory": memory}
    if gpus:
        alloc[GPU] = str(gpus)
    if pods is not None:
        alloc["pods"] = pods
    return NodeSpec(name, alloc, dict(labels or {}), tuple(taints), unschedulable)


def gpu(n: int, cpu: str = "1", memory: str = "1Gi") -> dict:
    return {GPU: str(n), "cpu": cpu, "memory": memory}


def taint(key: str, value: str, effect: str) -> dict:
    return {"key": key, "value": value, "effect": effect}


# --- the cases: (id, expected placer verdict, nodes, workload, bound pods) -----------------------

def _cases():
    c = []

    def case(cid, fits, nodes, workload, bound=()):
        c.append((cid, fits, Scenario(cid, tuple(nodes), workload, tuple(bound))))

    two8 = lambda p: [node(f"{p}-0"), node(f"{p}-1")]  # noqa: E731
    # GPUs, CPU, memory
    case("gpu-fit", True, two8("gpu-fit"), M.job("gpu-fit", 2, M.pod_spec(gpu(8))))
    case("gpu-nofit", False, two8("gpu-nofit"), M.job("gpu-nofit", 1, M.pod_spec(gpu(12))))
    case("cpu-fit", True, [node("cpu-fit-0", cpu="4")], M.deployment("cpu-fit", 2, M.pod_spec({"cpu": "1500m"})))
    case("cpu-nofit", False, [node("cpu-nofit-0", cpu="4")], M.deployment("cpu-nofit", 3, M.pod_spec({"cpu": "1500m"})))
    case("mem-fit", True, [node("mem-fit-0", memory="16Gi")], M.statefulset("mem-fit", 2, M.pod_spec({"memory": "8Gi"})))
    case("mem-nofit", False, [node("mem-nofit-0", memory="16Gi")],
         M.statefulset("mem-nofit", 2, M.pod_spec({"memory": "8193Mi"})))
    # pod slots, with and without pods already bound
    case("slots-fit", True, [node("slots-fit-0", pods="3")], M.deployment("slots-fit", 3, M.pod_spec({"cpu": "100m"})))
    case("slots-nofit", False, [node("slots-nofit-0", pods="3")],
         M.deployment("slots-nofit", 3, M.pod_spec({"cpu": "100m"})),
         [BoundPod("slots-nofit-old", "slots-nofit-0", {"cpu": "100m"})])
    case("slots-none-nofit", False, [node("slots-none-0", pods=None)], M.pod("slots-none", M.pod_spec({"cpu": "100m"})))
    # extended resources
    fpga = "example.com/fpga"
    case("ext-fit", True, [NodeSpec("ext-fit-0", {"cpu": "8", "memory": "8Gi", "pods": "110", fpga: "2"})],
         M.pod("ext-fit", M.pod_spec({fpga: "2"})))
    case("ext-nofit", False, [NodeSpec("ext-nofit-0", {"cpu": "8", "memory": "8Gi", "pods": "110", fpga: "2"}),
                              node("ext-nofit-1")],
         M.pod("ext-nofit", M.pod_spec({fpga: "3"})))
    # init containers and restartable sidecars
    case("init-fit", True, [node("init-fit-0", cpu="4")],
         M.job("init-fit", 1, M.pod_spec({"cpu": "1"}, init=[{"cpu": "4"}])))
    case("init-nofit", False, [node("init-nofit-0", cpu="4")],
         M.job("init-nofit", 1, M.pod_spec({"cpu": "1"}, init=[{"cpu": "4500m"}])))
    case("sidecar-fit", True, [node("sidecar-fit-0", cpu="4")],
         M.job("sidecar-fit", 1, M.pod_spec({"cpu": "2"}, sidecars=[(0, {"cpu": "2"})], init=[{"cpu": "2"}])))
    # the sidecar keeps running while the later init container runs: 2 + 3 > 4
    case("sidecar-nofit", False, [node("sidecar-nofit-0", cpu="4")],
         M.job("sidecar-nofit", 1, M.pod_spec({"cpu": "1"}, sidecars=[(0, {"cpu": "2"})], init=[{"cpu": "3"}])))
    # pod overhead from a RuntimeClass (set on the pod by the API server's admission)
    case("overhead-fit", True, [node("overhead-fit-0", cpu="4", memory="8Gi")],
         M.deployment("overhead-fit", 1, M.pod_spec({"cpu": "3", "memory": "7Gi"}, runtime_class=OVERHEAD_RC)))
    case("overhead-nofit", False, [node("overhead-nofit-0", cpu="4", memory="8Gi")],
         M.deployment("overhead-nofit", 1, M.pod_spec({"cpu": "3500m", "memory": "1Gi"}, runtime_class=OVERHEAD_RC)))
    case("runtimeclass-plain-fit", True, [node("rc-plain-0", cpu="4")],
         M.pod("rc-plain", M.pod_spec({"cpu": "4"}, runtime_class=PLAIN_RC)))
    # RuntimeClass scheduling: its nodeSelector and tolerations are merged into the pods
    pools = lambda p: [node(f"{p}-0", labels={"pool": "gpu"}, taints=(taint("dedicated", "ml", "NoSchedule"),)),  # noqa: E731
                       node(f"{p}-1", labels={"pool": "cpu"})]
    case("runtimeclass-scheduling-fit", True, pools("rcs-y")[:1],       # tainted: the class tolerates it
         M.job("rcs-y", 1, M.pod_spec(gpu(8), runtime_class=POOL_RC)))
    case("runtimeclass-scheduling-nofit", False, pools("rcs-n")[1:],     # pool=cpu: the class selects pool=gpu
         M.job("rcs-n", 1, M.pod_spec(gpu(8), runtime_class=POOL_RC)))
    # the API server refuses pods whose RuntimeClass is missing or contradicts their nodeSelector
    case("runtimeclass-missing-refused", False, pools("rcm"), M.job("rcm", 1, M.pod_spec(gpu(1), runtime_class="fid-none")))
    case("runtimeclass-conflict-refused", False, pools("rcc"),
         M.leaderworkerset("rcc", 1, 1, M.pod_spec(gpu(1), runtime_class=POOL_RC, node_selector={"pool": "cpu"})))
    # pod-level resources (spec.resources) replace the containers' cpu/memory total
    case("podlevel-fit", True, [node("podlevel-y-0", cpu="4")],
         M.pod("podlevel-y", {**M.pod_spec({"cpu": "1"}), "resources": {"requests": {"cpu": "4"}}}))
    case("podlevel-nofit", False, [node("podlevel-n-0", cpu="4")],
         M.pod("podlevel-n", {**M.pod_spec({"cpu": "1"}), "resources": {"requests": {"cpu": "4500m"}}}))
    # nodeSelector
    labelled = lambda p: [node(f"{p}-0", labels={"gpu": "h100"}), node(f"{p}-1", labels={"gpu": "a100"})]  # noqa: E731
    case("selector-fit", True, labelled("sel-fit"), M.job("sel-fit", 1, M.pod_spec(gpu(8), node_selector={"gpu": "h100"})))
    case("selector-nofit", False, labelled("sel-nofit"),
         M.job("sel-nofit", 2, M.pod_spec(gpu(8), node_selector={"gpu": "h100"})))
    # required node affinity, every operator, both ways
    aff = lambda p: [node(f"{p}-0", labels={"tier": "a", "cores": "64"}),  # noqa: E731
                     node(f"{p}-1", labels={"tier": "b", "cores": "16"})]
    for op, yes, no in [
        ("In", ("tier", "In", "a"), ("tier", "In", "c")),
        ("NotIn", ("tier", "NotIn", "a"), ("tier", "NotIn", "a", "b")),
        ("Exists", ("cores", "Exists"), ("zone", "Exists")),
        ("DoesNotExist", ("zone", "DoesNotExist"), ("tier", "DoesNotExist")),
        ("Gt", ("cores", "Gt", "32"), ("cores", "Gt", "64")),
        ("Lt", ("cores", "Lt", "32"), ("cores", "Lt", "16")),
    ]:
        low = op.lower()
        case(f"affinity-{low}-fit", True, aff(f"af-{low}-y"), M.job(f"af-{low}-y", 1, M.pod_spec(gpu(8), terms=[M.term(yes)])))
        case(f"affinity-{low}-nofit", False, aff(f"af-{low}-n"),
             M.job(f"af-{low}-n", 1, M.pod_spec(gpu(8), terms=[M.term(no)])))
    # Gt/Lt compare label values that parse as int64 only
    odd = [node("af-odd-0", labels={"cores": "1_0"}), node("af-odd-1", labels={"cores": "99999999999999999999"})]
    case("affinity-gt-not-int64-nofit", False, odd, M.job("af-odd", 1, M.pod_spec(gpu(1), terms=[M.term(("cores", "Gt", "5"))])))
    # terms are ORed, expressions inside a term ANDed
    case("affinity-or-fit", True, aff("af-or"),
         M.job("af-or", 2, M.pod_spec(gpu(8), terms=[M.term(("tier", "In", "a")), M.term(("cores", "Lt", "20"))])))
    case("affinity-and-nofit", False, aff("af-and"),
         M.job("af-and", 1, M.pod_spec(gpu(8), terms=[M.term(("tier", "In", "a"), ("cores", "Lt", "20"))])))
    # taints and tolerations
    for effect in ("NoSchedule", "NoExecute"):
        e = effect.lower()
        tainted = lambda p: [node(f"{p}-0", taints=(taint("dedicated", "ml", effect),))]  # noqa: E731
        case(f"taint-{e}-untolerated", False, tainted(f"t-{e}-u"), M.job(f"t-{e}-u", 1, M.pod_spec(gpu(1))))
        case(f"taint-{e}-equal", True, tainted(f"t-{e}-eq"), M.job(f"t-{e}-eq", 1, M.pod_spec(gpu(1), tolerations=[
            {"key": "dedicated", "operator": "Equal", "value": "ml", "effect": effect}])))
        case(f"taint-{e}-equal-wrong-value", False, tainted(f"t-{e}-wv"), M.job(f"t-{e}-wv", 1, M.pod_spec(gpu(1), tolerations=[
            {"key": "dedicated", "operator": "Equal", "value": "web", "effect": effect}])))
        case(f"taint-{e}-exists", True, tainted(f"t-{e}-ex"), M.job(f"t-{e}-ex", 1, M.pod_spec(gpu(1), tolerations=[
            {"key": "dedicated", "operator": "Exists"}])))
    case("taint-wrong-effect", False, [node("t-we-0", taints=(taint("dedicated", "ml", "NoExecute"),))],
         M.job("t-we", 1, M.pod_spec(gpu(1), tolerations=[{"key": "dedicated", "operator": "Exists",
                                                             "effect": "NoSchedule"}])))
    case("taint-prefer-fit", True, [node("t-pref-0", taints=(taint("dedicated", "ml", "PreferNoSchedule"),))],
         M.job("t-pref", 1, M.pod_spec(gpu(1))))
    # cordoned nodes; a pod that tolerates every taint may still go there
    case("cordoned-nofit", False, [node("cord-0", unschedulable=True), node("cord-1", gpus=4)],
         M.job("cord", 1, M.pod_spec(gpu(8))))
    case("cordoned-tolerate-all-fit", True, [node("cord-all-0", unschedulable=True)],
         M.job("cord-all", 1, M.pod_spec(gpu(8), tolerations=[{"operator": "Exists"}])))
    # pods already bound take capacity; terminated ones do not
    used = lambda p: [node(f"{p}-0")]  # noqa: E731
    case("bound-nofit", False, used("bd-n"), M.job("bd-n", 1, M.pod_spec(gpu(4))),
         [BoundPod("bd-n-old", "bd-n-0", gpu(6))])
    case("bound-fit", True, used("bd-y"), M.job("bd-y", 1, M.pod_spec(gpu(2))),
         [BoundPod("bd-y-old", "bd-y-0", gpu(6))])
    case("bound-succeeded-fit", True, used("bd-s"), M.job("bd-s", 1, M.pod_spec(gpu(8))),
         [BoundPod("bd-s-old", "bd-s-0", gpu(8), phase="Succeeded")])
    # fragmentation: 4 x 3 free GPUs = 12 free, but no node has 4
    frag = [node(f"frag-{i}") for i in range(4)]
    case("fragmented-nofit", False, frag, M.job("frag", 2, M.pod_spec(gpu(4))),
         [BoundPod(f"frag-old-{i}", f"frag-{i}", gpu(5)) for i in range(4)])
    # CRD kinds, pods as their operators create them
    case("jobset-fit", True, two8("js-y"),
         M.jobset("js-y", [("workers", 2, 2, M.pod_spec(gpu(4))), ("driver", 1, 1, M.pod_spec({"cpu": "1"}))]))
    case("jobset-nofit", False, two8("js-n"), M.jobset("js-n", [("workers", 1, 3, M.pod_spec(gpu(6)))]))
    case("lws-fit", True, two8("lws-y"),
         M.leaderworkerset("lws-y", 2, 2, M.pod_spec(gpu(4)), leader=M.pod_spec(gpu(4))))
    case("ray-nofit", False, [node("ray-n-0", cpu="8"), node("ray-n-1", cpu="8")],
         M.raycluster("ray-n", M.pod_spec({"cpu": "4"}), 2, M.pod_spec(gpu(4, cpu="6"))))
    case("pytorchjob-fit", True, [node("pt-y-0", labels={"pool": "train"})],
         M.pytorchjob("pt-y", 1, M.pod_spec(gpu(4), node_selector={"pool": "train"})))
    return c


CASES = _cases()


def _explain(v: Verdict) -> str:
    pods = ", ".join(f"{p.name}->{p.node or p.unschedulable}" for p in v.outcome.pods)
    return (f"{v.scenario}: placer {'places' if v.placer_fits else 'leaves unplaced'} "
            f"({v.placer_reason or v.placer_nodes}); pods: {pods}; problems: {list(v.problems)}")


@pytest.fixture(scope="module")
def verdicts(pool) -> dict[str, Verdict]:
    """Every case, run once over the pool's clusters in parallel."""
    return {v.scenario: v for v in pool.run([s for _, _, s in CASES])}


@pytest.mark.parametrize("cid,fits", [(cid, fits) for cid, fits, _ in CASES], ids=[cid for cid, _, _ in CASES])
def test_scheduler_agrees_with_placer(verdicts, cid, fits):
    v = verdicts[cid]
    assert v.placer_fits == fits, f"the case expects placer to {'place' if fits else 'refuse'} it: {_explain(v)}"
    assert v.agree, _explain(v)
    if fits:
        assert v.outcome.all_bound and len(v.outcome.pods) == v.outcome.expected > 0
    elif "refused" in cid:
        assert v.outcome.refused and "forbidden" in " ".join(v.outcome.refused).lower(), _explain(v)
    else:
        stuck = v.outcome.unschedulable
        assert stuck and all(p.unschedulable.startswith("Unschedulable:") for p in stuck), _explain(v)


def _placer(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "placer", *args], capture_output=True, text=True, timeout=120)


def test_submit_binds_indexed_job_and_fragmented_workload_stays_unschedulable(pool, real_env, tmp_path):
    """The issue's must-show: an Indexed Job of 3 pods x 4 GPUs submitted with `placer submit`
    onto nodes with 4 free GPUs each gets all 3 pods bound by the real scheduler; then a
    workload placer leaves unplaced because of fragmentation (6 GPUs free in total, 3 per
    node) stays unschedulable when forced there."""
    import json

    import yaml

    from tests.realkube.pods import materialise
    from tests.realkube.scenario import observe, reset

    cluster, ns = pool.clusters[0], "fidelity-submit"
    nodes = [node(f"ms-{i}") for i in range(5)]
    cluster.add_nodes(nodes)
    try:
        cluster.ensure_namespace(ns)
        cluster.bind_pods(ns, [BoundPod(f"ms-old-{i}", f"ms-{i}", gpu(4 if i < 3 else 5)) for i in range(5)])
        train = {**M.job("train", 3, M.pod_spec(gpu(4))), "metadata": {"name": "train", "namespace": ns}}
        path = tmp_path / "train.yaml"
        path.write_text(yaml.safe_dump(train))
        done = _placer("submit", "-f", str(path), "--kubeconfig", str(real_env.kubeconfig),
                       "--cluster", cluster.context, "-o", "json")
        assert done.returncode == 0, done.stderr
        out = observe(cluster, ns, 3, timeout=60)
        assert out.all_bound, out
        assert sorted(p.node for p in out.pods) == ["ms-0", "ms-1", "ms-2"]

        frag = {**M.job("frag", 1, M.pod_spec(gpu(6))), "metadata": {"name": "frag", "namespace": ns}}
        path = tmp_path / "frag.yaml"
        path.write_text(yaml.safe_dump(frag))
        done = _placer("submit", "-f", str(path), "--kubeconfig", str(real_env.kubeconfig),
                       "--cluster", cluster.context, "-o", "json")
        assert done.returncode == 3, done.stdout + done.stderr
        reason = json.loads(done.stdout)["unplaced"][0]["reasons"][cluster.context]
        assert "largest free block is 3 GPUs" in reason and "6 GPUs free" in reason, reason

        from placer.inputs.manifests import load_groups
        workload = load_groups([str(path)], pool.catalog)[0].workloads[0]
        assert materialise(cluster, ns, workload, pool.catalog) == (1, [])
        out = observe(cluster, ns, 4, timeout=30)       # the 3 bound pods of train, and frag's
        stuck = [p for p in out.pods if p.name.startswith("frag-")]
        assert len(stuck) == 1 and stuck[0].node is None, out
        assert "Insufficient nvidia.com/gpu" in (stuck[0].unschedulable or ""), stuck[0]
    finally:
        reset(cluster, ns, [n.name for n in nodes])


# --- spread (issue 21): placer's shares against a cluster-totals division, per share ----------------

def test_spread_shares_bind_where_a_cluster_totals_division_leaves_pods_pending(pool, tmp_path):
    """A Deployment divided 3:1 over fid-a and fid-b, and a StatefulSet duplicated onto 2 of the 3
    clusters. fid-a: 4 nodes of 4 GPUs, 1 in use on each: 12 GPUs free by its total, but each
    node holds one 2-GPU pod and no 4-GPU pod. placer's shares (forced onto the clusters as
    `placer submit` writes them) all bind; the totals division sends 6 replicas to fid-a (4 bind)
    and a duplicate copy to fid-a, the cluster with the most free GPUs (none binds)."""
    from tests.realkube.spread import SpreadScenario, run_all

    a, b, c = CLUSTERS

    def fleet(p):
        nodes = {a: tuple(node(f"{p}-a{i}", gpus=4) for i in range(4)), b: (node(f"{p}-b0", gpus=8),),
                 c: tuple(node(f"{p}-c{i}", gpus=4) for i in range(2))}
        return nodes, {a: tuple(BoundPod(f"{p}-old-{i}", f"{p}-a{i}", gpu(1)) for i in range(4))}

    nodes, bound = fleet("sdiv")
    web = M.deployment("web", 8, M.pod_spec(gpu(2, cpu="100m", memory="64Mi")))
    web["metadata"]["annotations"] = {"placer.dev/spread": "divide", "placer.dev/spread-weights": f"{a}=3,{b}=1"}
    divided = SpreadScenario("sdiv", {a: nodes[a], b: nodes[b]}, web, {a: bound[a]})
    nodes, bound = fleet("sdup")
    db = M.statefulset("db", 2, M.pod_spec(gpu(4, cpu="100m", memory="64Mi")))
    db["metadata"]["annotations"] = {"placer.dev/spread": "duplicate", "placer.dev/spread-clusters": "2"}
    duplicated = SpreadScenario("sdup", nodes, db, bound)
    by_cluster = dict(zip(pool.contexts, pool.clusters))
    got = run_all([divided, duplicated], clusters=by_cluster, kube=pool.kubes[0], catalog=pool.catalog,
                  namespace=pool.namespace, workdir=tmp_path, timeout=60)
    errors = [v for v in got if isinstance(v, BaseException)]
    assert not errors, errors
    div, dup = got
    # placer: fid-a's nodes hold 4 of the 2-GPU pods, fid-b the other 4; every pod bound
    assert {s.cluster: s.replicas for s in div.placer} == {a: 4, b: 4}, div
    assert all(s.all_bound for s in div.placer), div.placer
    # the totals: 6 and 2 by the weights, fid-a's 12 free GPUs cover 6 x 2; 2 pods stay Pending
    assert {s.cluster: (s.replicas, s.bound) for s in div.totals} == {a: (6, 4), b: (2, 2)}, div.totals
    assert all("Insufficient nvidia.com/gpu" in r for r in next(s for s in div.totals if s.cluster == a).pending)
    # duplicate: placer's two copies on fid-b and fid-c, every pod bound; the totals pick fid-a
    assert sorted(s.cluster for s in dup.placer) == [b, c] and all(s.all_bound for s in dup.placer), dup.placer
    stuck = next(s for s in dup.totals if s.cluster == a)
    assert stuck.pods == 2 and stuck.bound == 0, dup.totals
