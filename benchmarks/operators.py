"""Operators benchmark: placer's prediction of a workload's pods against the pods the real operator
creates (issue 20).

    python3 benchmarks/operators.py [--variants 8] [--seed 1] [--types JobSet,RayJob,...] [--dir DIR] [--keep]

Two clusters, east (4 KWOK nodes) and west (3), each 8 GPUs, 96 CPUs and 1 TiB, started by
`hack/kube-env up --operators ...` with the real JobSet, LWS and KubeRay operators (PyTorchJob and
MPIJob join once hack/kube-env knows training-operator and mpi-operator: until then they are
skipped with one line). Per type, seeded variants (benchmarks/operator_variants.py), one at a
time, each in a fresh namespace:

1. `placer describe -f` the object: the pods placer predicts, per component instance, with the
   per-pod requests placer counts;
2. `placer submit` it: the real webhooks admit (and default) it on the cluster placer plans;
3. wait until the operator says it has made everything (its own status, not placer's: JobSet's
   replicatedJobsStatus, LWS readyReplicas, RayCluster state and ready workers, RayJob's
   deployment status and submitter Job, Kubeflow's Running condition) and KWOK runs its pods;
4. judge: count (the namespace's pods against placer's total, and per instance), per-pod requests
   (each pod's effective requests by Kubernetes' rules against the podResources of the instance
   whose selector picks it), selector match (the definition's pod selector of each instance,
   from `placer describe` of the live object, evaluated by the API server, picks exactly its
   pods, and every pod is picked once) and binding (every pod bound to a node of the cluster
   placer chose, none on the other).

Every disagreement is printed with the object and the pod.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from benchmarks import operator_variants as V  # noqa: E402
from tests.kubeenv import RealKube, built, wait_for  # noqa: E402
from tests.realkube.operators import effective_requests, placer_cli, predicted_requests  # noqa: E402

CLUSTERS = {"east": 4, "west": 3}       # KWOK nodes of 8 GPUs each
GPUS_PER_NODE = 8
PIN, PIN_GPUS = "placer.dev/cluster", 16     # every third variant pinned to west when it fits there
CHECKS = ("admitted", "count", "requests", "selector", "binding")


def annotations(obj: dict) -> dict:
    return obj["metadata"].get("annotations") or {}


def conditions(obj: dict) -> dict[str, str]:
    return {c.get("type"): c.get("status") for c in (obj.get("status") or {}).get("conditions") or ()}


def jobset_done(obj: dict, pods: list[dict]) -> bool:
    st = {s["name"]: s for s in (obj.get("status") or {}).get("replicatedJobsStatus") or ()}
    return all((st.get(rj["name"], {}).get("ready", 0) + st.get(rj["name"], {}).get("succeeded", 0))
               >= rj.get("replicas", 1) for rj in obj["spec"]["replicatedJobs"])


def lws_done(obj: dict, pods: list[dict]) -> bool:
    return (obj.get("status") or {}).get("readyReplicas", 0) >= obj["spec"].get("replicas", 1)


def raycluster_ready(status: dict) -> bool:
    return status.get("state") == "ready" and \
        status.get("readyWorkerReplicas", 0) >= status.get("desiredWorkerReplicas", 0)


def raycluster_done(obj: dict, pods: list[dict]) -> bool:
    return raycluster_ready(obj.get("status") or {})


def rayjob_done(obj: dict, pods: list[dict]) -> bool:
    """The operator creates the submitter Job (K8sJobMode) once its cluster is ready, then says Running."""
    status = obj.get("status") or {}
    if status.get("jobDeploymentStatus") in (None, "", "New", "Initializing"):
        return False
    if obj["spec"].get("submissionMode", "K8sJobMode") == "K8sJobMode":
        return any(p["metadata"].get("labels", {}).get("batch.kubernetes.io/job-name") for p in pods)
    return True


def kubeflow_done(obj: dict, pods: list[dict]) -> bool:
    return conditions(obj).get("Running") == "True"


@dataclass(frozen=True)
class WorkloadType:
    kind: str
    operator: str                            # hack/kube-env's name for it (hack/operators-release)
    resource: str                            # plural, for reading the live object
    generate: Callable[[random.Random, str, str], tuple[dict, list[str]]]
    done: Callable[[dict, list[dict]], bool]


# One entry per type: PyTorchJob and MPIJob run as soon as hack/kube-env knows their operator.
TYPES = (
    WorkloadType("JobSet", "jobset", "jobsets", V.jobset, jobset_done),
    WorkloadType("LeaderWorkerSet", "lws", "leaderworkersets", V.leaderworkerset, lws_done),
    WorkloadType("RayCluster", "kuberay", "rayclusters", V.raycluster, raycluster_done),
    WorkloadType("RayJob", "kuberay", "rayjobs", V.rayjob, rayjob_done),
    WorkloadType("PyTorchJob", "training-operator", "pytorchjobs", V.pytorchjob, kubeflow_done),
    WorkloadType("MPIJob", "mpi-operator", "mpijobs", V.mpijob, kubeflow_done),
)


@dataclass
class Tally:
    variants: int = 0
    predicted: int = 0
    created: int = 0
    agree: dict[str, int] = field(default_factory=lambda: {c: 0 for c in CHECKS})
    unplaced: int = 0
    seconds: float = 0.0


@dataclass
class Disagreement:
    kind: str
    check: str
    what: str
    obj: dict
    pod: dict | None = None


def start(directory: Path, wanted: list[str]) -> tuple[RealKube, dict[str, str]]:
    """`hack/kube-env up --operators ...` of east and west. An operator kube-env does not know (or
    whose module is not served) is dropped, with kube-env's one line as the reason, and the rest start."""
    dropped: dict[str, str] = {}
    while True:
        print(f"operators: starting east and west with {','.join(wanted)} and KWOK (about 30 s once built; "
              f"a cold build of an operator takes minutes and says so)", flush=True)
        try:
            return RealKube(directory, tuple(CLUSTERS), operators=",".join(wanted)), dropped
        except RuntimeError as e:
            m = re.search(r"unknown operator '([^']+)'|operator ([\w-]+): module", str(e))
            if not m or len(wanted) == 1:
                raise
            gone = m.group(1) or m.group(2)
            dropped[gone] = str(e)[str(e).rfind("kube-env: "):].strip()
            wanted = [w for w in wanted if w != gone]


def pods_of(env: RealKube, cluster: str, ns: str, selector: str | None = None) -> list[dict]:
    return env.pods(cluster, ns, selector)


def run_variant(env: RealKube, work: Path, t: WorkloadType, obj: dict, out: list[Disagreement],
                tally: Tally, timeout: float, pin: bool) -> str:
    name, ns = obj["metadata"]["name"], obj["metadata"]["namespace"]
    for cluster in CLUSTERS:
        env.namespace(cluster, ns)
    path = work / f"{ns}.yaml"
    path.write_text(yaml.safe_dump(obj))
    predicted = placer_cli(env.kubeconfig, work, "describe", "-f", str(path), "-o", "json")[0]
    if pin and predicted["gpus"] <= PIN_GPUS:
        # placer prefers east here; a pinned variant shows the pods follow the plan to west too
        obj["metadata"]["annotations"] = {PIN: "west"}
        path.write_text(yaml.safe_dump(obj))
    tally.variants += 1
    tally.predicted += predicted["pods"]
    plan = placer_cli(env.kubeconfig, work, "submit", "-f", str(path), "-o", "json", "--time-limit", "5",
                      ok=(0, 1, 3))
    if plan.get("failed"):               # the API server (schema, webhooks) refused what placer wrote
        out.extend(Disagreement(t.kind, "admitted", f"{ns}/{name}: {f['error']}", obj) for f in plan["failed"])
        return "refused"
    if not plan.get("placements"):
        tally.unplaced += 1
        out.append(Disagreement(t.kind, "placed", f"{ns}/{name} unplaced: {json.dumps(plan)[:300]}", obj))
        return "unplaced"
    where = plan["placements"][0]["cluster"]
    client = env.client(where)

    def done():
        live, pods = client.get(t.resource, name, ns), pods_of(env, where, ns)
        running = all(p["spec"].get("nodeName") and (p.get("status") or {}).get("phase") == "Running" for p in pods)
        return (live, pods) if pods and running and len(pods) >= predicted["pods"] and t.done(live, pods) else None
    try:
        _, pods = wait_for(done, timeout, f"{t.kind} {ns}/{name} made and running", interval=0.5)
    except AssertionError:
        pods = pods_of(env, where, ns)
    tally.created += len(pods)
    live_view = placer_cli(env.kubeconfig, work, "describe", f"{t.resource}/{name}", "-n", ns,
                           "--context", where, "--kubeconfig", str(env.kubeconfig), "-o", "json")[0]
    judged = judge(env, where, ns, predicted, live_view, pods, t, obj)
    for check in CHECKS:
        tally.agree[check] += not any(d.check == check for d in judged)
    out.extend(judged)
    return f"{where}{' (pinned)' if PIN in annotations(obj) else ''}, {len(pods)}/{predicted['pods']} pods" + ("" if not judged else f", {len(judged)} disagreements")


def judge(env: RealKube, where: str, ns: str, predicted: dict, live_view: dict, pods: list[dict],
          t: WorkloadType, obj: dict) -> list[Disagreement]:
    bad: list[Disagreement] = []
    tag = f"{ns}/{obj['metadata']['name']}"
    if len(pods) != predicted["pods"]:
        bad.append(Disagreement(t.kind, "count", f"{tag}: {len(pods)} pods created, {predicted['pods']} predicted",
                                obj))
    shape = {(c["component"], c["instance"]): c for c in predicted["components"]}
    picked: dict[str, list[str]] = {}
    for comp in live_view["components"]:
        key = (comp["component"], comp["instance"])
        selected = pods_of(env, where, ns, comp["selector"]) if comp["pods"] else []
        for p in selected:
            picked.setdefault(p["metadata"]["name"], []).append(f"{key[0]}/{key[1]}")
        want = shape.get(key, comp)
        if len(selected) != want["pods"]:
            bad.append(Disagreement(t.kind, "selector", f"{tag}: {key[0]}/{key[1]} selector {comp['selector']!r} "
                                    f"picks {len(selected)} pods, {want['pods']} predicted", obj,
                                    selected[0] if selected else None))
        for p in selected:
            got, expected = effective_requests(p), predicted_requests(want)
            if got != expected:
                bad.append(Disagreement(t.kind, "requests", f"{tag}: pod {p['metadata']['name']} ({key[0]}/{key[1]}) "
                                        f"requests {text(got)}, placer counts {text(expected)}", obj, p))
    for p in pods:
        owners = picked.get(p["metadata"]["name"], [])
        if len(owners) != 1:
            bad.append(Disagreement(t.kind, "selector", f"{tag}: pod {p['metadata']['name']} picked by "
                                    f"{owners or 'no selector'}", obj, p))
    nodes = {n["metadata"]["name"] for n in env.client(where).list("nodes").items}
    for p in pods:
        if p["spec"].get("nodeName") not in nodes:
            bad.append(Disagreement(t.kind, "binding", f"{tag}: pod {p['metadata']['name']} on "
                                    f"{p['spec'].get('nodeName')!r}, not a node of {where}", obj, p))
    for other in CLUSTERS:
        if other != where and (stray := pods_of(env, other, ns)):
            bad.append(Disagreement(t.kind, "binding", f"{tag}: {len(stray)} pods on {other}, planned {where}",
                                    obj, stray[0]))
    return bad


def text(requests: dict) -> str:
    return "{" + ", ".join(f"{k}: {v if v.denominator == 1 else float(v)}" for k, v in sorted(requests.items())) + "}"


def clean(env: RealKube, ns: str) -> None:
    """The variant's namespace gone on both clusters (KWOK deletes its pods), so its capacity is free."""
    for cluster in CLUSTERS:
        env.client(cluster).delete("namespaces", ns, missing_ok=True)
    for cluster in CLUSTERS:
        c = env.client(cluster)
        wait_for(lambda c=c: ns not in {n["metadata"]["name"] for n in c.list("namespaces").items}, 300,
                 f"namespace {ns} deleted on {cluster}", interval=0.5)


def pod_text(pod: dict) -> str:
    spec = pod["spec"]
    return json.dumps({"name": pod["metadata"]["name"], "labels": pod["metadata"].get("labels"),
                       "nodeName": spec.get("nodeName"),
                       "containers": [{c["name"]: c.get("resources")} for c in spec.get("containers") or ()],
                       "initContainers": [{c["name"]: c.get("resources"), "restartPolicy": c.get("restartPolicy")}
                                          for c in spec.get("initContainers") or ()]})


def report(tallies: dict[str, Tally], disagreements: list[Disagreement], skipped: dict[str, str]) -> None:
    print()
    print("| type | variants | pods predicted | pods created | admitted | count | requests | selector | binding "
          "| s/variant |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for kind, t in tallies.items():
        pct = [f"{t.agree[c]}/{t.variants} ({100 * t.agree[c] / max(t.variants, 1):.0f}%)" for c in CHECKS]
        print(f"| {kind} | {t.variants}{f' ({t.unplaced} unplaced)' if t.unplaced else ''} | {t.predicted} | "
              f"{t.created} | " + " | ".join(pct) + f" | {t.seconds / max(t.variants, 1):.1f} |")
    for kind, why in skipped.items():
        print(f"| {kind} | skipped: {why} |")
    print(f"\n{len(disagreements)} disagreements")
    shown: set[str] = set()
    for d in disagreements:
        where = f"{d.obj['metadata']['namespace']}/{d.obj['metadata']['name']}"
        if where not in shown:
            shown.add(where)
            print(f"- {d.kind} {where}: {json.dumps(d.obj)}")
        print(f"  [{d.check}] {d.what}")
        if d.pod is not None:
            print(f"    pod: {pod_text(d.pod)}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--variants", type=int, default=8, help="per type")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--types", default=",".join(t.kind for t in TYPES))
    ap.add_argument("--dir", help="kube-env directory (default: a temporary one, torn down at the end)")
    ap.add_argument("--keep", action="store_true", help="leave the clusters running")
    ap.add_argument("--timeout", type=float, default=180, help="per variant, for the operator to make its pods")
    args = ap.parse_args(argv)
    types = [t for t in TYPES if t.kind in args.types.split(",")]
    if not built() and shutil.which("go") is None:
        print("operators: no Go and no built control planes (hack/kube-env): nothing to run", file=sys.stderr)
        return 2
    directory = Path(args.dir or tempfile.mkdtemp(prefix="placer-operators-"))
    env, dropped = start(directory, list(dict.fromkeys(t.operator for t in types)))
    skipped = {t.kind: f"no {t.operator} ({dropped[t.operator]})" for t in types if t.operator in dropped}
    for kind, why in skipped.items():
        print(f"operators: {kind} skipped: {why}", flush=True)
    tallies: dict[str, Tally] = {}
    disagreements: list[Disagreement] = []
    started = time.monotonic()
    try:
        for cluster, count in CLUSTERS.items():
            env.nodes(cluster, count=count, prefix=f"{cluster[0]}-", gpus=GPUS_PER_NODE, kwok=True)
        work = directory / "work"
        work.mkdir(exist_ok=True)
        for t in (t for t in types if t.kind not in skipped):
            tally = tallies.setdefault(t.kind, Tally())
            print(f"operators: {t.kind}: {args.variants} variants (about 10 to 40 s each)", flush=True)
            rng = random.Random(f"{args.seed}-{t.kind}")
            for i in range(args.variants):
                ns = f"ob-{t.kind.lower()}-{args.seed}-{i}"
                obj, features = t.generate(rng, f"v{i}", ns)
                began = time.monotonic()
                clean(env, ns)                      # a run stopped half-way may have left it
                verdict = run_variant(env, work, t, obj, disagreements, tally, args.timeout, pin=i % 3 == 2)
                clean(env, ns)
                tally.seconds += time.monotonic() - began
                print(f"operators: {t.kind} {i + 1}/{args.variants} ({', '.join(dict.fromkeys(features)) or 'plain'}): "
                      f"{verdict} "
                      f"in {time.monotonic() - began:.0f}s", flush=True)
    finally:
        if not args.keep:
            env.down()
            if not args.dir:
                shutil.rmtree(directory, ignore_errors=True)
    print(f"\noperators: {sum(t.variants for t in tallies.values())} variants in {time.monotonic() - started:.0f}s, "
          f"seed {args.seed}, clusters {', '.join(f'{k} {v}x{GPUS_PER_NODE} GPUs' for k, v in CLUSTERS.items())}")
    report(tallies, disagreements, skipped)
    return 0 if not disagreements else 3


if __name__ == "__main__":
    sys.exit(main())
