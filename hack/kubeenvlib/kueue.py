"""Kueue (sigs.k8s.io/kueue, pinned in hack/operators-release) beside kube-env's clusters, and
MultiKueue across them as Kueue's documentation sets it up (site/static/examples/multikueue/tas/):

- every cluster with `--operators kueue` runs Kueue (a hub too: it is the MultiKueue manager), its
  webhooks on 127.0.0.1 with kube-env's certificate, no metrics, no leader election, no visibility
  server (its port is not configurable per cluster), integrations for batch/Job and for the workload
  operators the cluster runs;
- `hack/kube-env multikueue --manager M W...` configures, on each worker W, a Topology with one
  level (kubernetes.io/hostname), a ResourceFlavor using it (Topology-Aware Scheduling: a worker
  admits a workload only when its pods fit node by node) and a ClusterQueue whose nominal quotas
  are the worker's allocatable CPU, memory and nvidia.com/gpu; on M the same Topology and flavor,
  one kubeconfig Secret and MultiKueueCluster per worker, a MultiKueueConfig listing them, an
  AdmissionCheck of controller kueue.x-k8s.io/multikueue and a ClusterQueue using it whose quotas
  are the workers' sum (what Kueue's docs advise); a LocalQueue QUEUE in every namespace given, on
  every cluster (MultiKueue expects the namespace and LocalQueue on the workers too).

A Job labelled kueue.x-k8s.io/queue-name=kube-env on M is admitted by M's ClusterQueue, copied to the
workers, admitted by one of them (the first to fit it; MultiKueue's default AllAtOnce dispatcher)
and its pods run there."""
from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from kubeenvlib.common import Fail

if TYPE_CHECKING:
    from kubeenvlib.operators import Run

NAMESPACE = "kueue-system"
QUEUE = "kube-env"                       # the ClusterQueue on every cluster, and the LocalQueues
TOPOLOGY = "kube-env-hostname"
FLAVOR = "kube-env-tas"
CHECK = "kube-env-multikueue"            # the AdmissionCheck and the MultiKueueConfig
GPU = "nvidia.com/gpu"
# a TAS flavor needs a node label: one every node has (kube-env's and a kubelet's), so the flavor is
# every node, and the pods get it as a nodeSelector that selects nothing away
NODES = ("kubernetes.io/os", "linux")
RESOURCES = ("cpu", "memory", GPU)
API = "/apis/kueue.x-k8s.io/v1beta2"
APPLY = "application/apply-patch+yaml"
QUERY = "?fieldManager=kube-env&force=true"
# Kueue's integrations for the workload operators kube-env runs beside it
FRAMEWORKS = {"jobset": ("jobset.x-k8s.io/jobset",), "lws": ("leaderworkerset.x-k8s.io/leaderworkerset",),
              "kuberay": ("ray.io/rayjob", "ray.io/raycluster")}
# Without its own certificate management Kueue reads a metrics certificate from this fixed path
# (cmd/kueue/main.go) even when its metrics server is off: any valid pair will do.
METRICS_CERTS = Path("/etc/kueue/metrics/certs")

Api = Callable[..., object]


def command(run: "Run") -> list[str]:
    metrics_certs(run.certs)
    frameworks = ["batch/job", *(f for op in run.operators for f in FRAMEWORKS.get(op, ()))]
    config = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration", "namespace": NAMESPACE,
              "webhook": {"port": run.webhook_port, "host": "127.0.0.1", "certDir": str(run.certs)},
              "metrics": {"bindAddress": "0"},
              "health": {"healthProbeBindAddress": f"127.0.0.1:{run.health_port}"},
              "leaderElection": {"leaderElect": False},
              "internalCertManagement": {"enable": False},
              "integrations": {"frameworks": frameworks},
              "featureGates": {"VisibilityOnDemand": False}}
    path = run.home / "config.yaml"
    path.write_text(json.dumps(config, indent=1) + "\n")  # JSON is YAML
    return [str(run.binary), f"--config={path}", f"--kubeconfig={run.kubeconfig}", "--zap-log-level=info"]


def metrics_certs(certs: Path) -> None:
    if (METRICS_CERTS / "tls.crt").exists() and (METRICS_CERTS / "tls.key").exists():
        return
    try:
        METRICS_CERTS.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=METRICS_CERTS.parent))
        for name in ("tls.crt", "tls.key"):
            shutil.copyfile(certs / name, staging / name)
        os.replace(staging, METRICS_CERTS)   # whole, or not at all (another cluster may race us)
    except OSError as e:
        if not (METRICS_CERTS / "tls.crt").exists():
            raise Fail(f"kueue: cannot write the metrics certificate Kueue reads at the fixed path "
                       f"{METRICS_CERTS}: {e}") from None


# --- quantities and quotas ----------------------------------------------------------------

SUFFIX = {"": 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
          "Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50}


def quantity(text: str) -> float:
    m = re.fullmatch(r"([0-9.]+)([a-zA-Z]*)", str(text).strip())
    if not m or m.group(2) not in SUFFIX:
        raise Fail(f"kueue: cannot read quantity {text!r}")
    return float(m.group(1)) * SUFFIX[m.group(2)]


def allocatable(api: Api) -> dict[str, float]:
    """The sum of the cluster's schedulable nodes' allocatable CPU, memory and GPUs."""
    total = dict.fromkeys(RESOURCES, 0.0)
    for node in api("GET", "/api/v1/nodes").get("items") or ():  # type: ignore[union-attr]
        if (node.get("spec") or {}).get("unschedulable"):
            continue
        alloc = (node.get("status") or {}).get("allocatable") or {}
        for r in RESOURCES:
            total[r] += quantity(alloc.get(r, "0"))
    return total


def quota(total: dict[str, float]) -> list[dict]:
    text = {"cpu": f"{round(total['cpu'] * 1000)}m", "memory": str(round(total["memory"])),
            GPU: str(round(total[GPU]))}
    return [{"name": r, "nominalQuota": text[r]} for r in RESOURCES]


# --- objects --------------------------------------------------------------------------------

def kueue_obj(kind: str, name: str, spec: dict, namespace: str | None = None) -> dict:
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": kind, "metadata": meta, "spec": spec}


def tas_objects() -> list[dict]:
    return [kueue_obj("Topology", TOPOLOGY, {"levels": [{"nodeLabel": "kubernetes.io/hostname"}]}),
            kueue_obj("ResourceFlavor", FLAVOR, {"topologyName": TOPOLOGY, "nodeLabels": dict([NODES])})]


def cluster_queue(total: dict[str, float], check: str | None) -> dict:
    spec: dict = {"namespaceSelector": {},
                  "resourceGroups": [{"coveredResources": list(RESOURCES),
                                      "flavors": [{"name": FLAVOR, "resources": quota(total)}]}]}
    if check:
        spec["admissionChecksStrategy"] = {"admissionChecks": [{"name": check}]}
    return kueue_obj("ClusterQueue", QUEUE, spec)


def manager_objects(workers: list[str]) -> list[dict]:
    out = []
    for w in workers:
        out.append(kueue_obj("MultiKueueCluster", w, {"clusterSource": {"kubeConfig": {
            "locationType": "Secret", "location": secret_name(w)}}}))
    out.append(kueue_obj("MultiKueueConfig", CHECK, {"clusters": list(workers)}))
    out.append(kueue_obj("AdmissionCheck", CHECK, {"controllerName": "kueue.x-k8s.io/multikueue", "parameters": {
        "apiGroup": "kueue.x-k8s.io", "kind": "MultiKueueConfig", "name": CHECK}}))
    return out


def secret_name(worker: str) -> str:
    return f"kube-env-{worker}"


def path_of(obj: dict) -> str:
    kind, meta = obj["kind"], obj["metadata"]
    if kind == "Namespace":
        return f"/api/v1/namespaces/{meta['name']}"
    if kind == "Secret":
        return f"/api/v1/namespaces/{meta['namespace']}/secrets/{meta['name']}"
    plural = {"Topology": "topologies"}.get(kind, kind.lower() + "s")
    ns = f"/namespaces/{meta['namespace']}" if meta.get("namespace") else ""
    return f"{API}{ns}/{plural}/{meta['name']}"


def apply(api: Api, objs: list[dict]) -> None:
    for obj in objs:
        api("PATCH", path_of(obj) + QUERY, obj, APPLY)


def namespaces_and_queues(namespaces: list[str]) -> list[dict]:
    out = []
    for ns in namespaces:
        out.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        out.append(kueue_obj("LocalQueue", QUEUE, {"clusterQueue": QUEUE}, ns))
    return out


# --- MultiKueue ------------------------------------------------------------------------------

def configure(apis: dict[str, Api], manager: str, workers: list[str], namespaces: list[str],
              kubeconfigs: dict[str, dict], deadline: float,
              manager_factor: float = 1.0) -> dict[str, dict[str, float]]:
    """Configure MultiKueue (see the module's docstring); returns each worker's quotas. Waits until
    every ClusterQueue, the AdmissionCheck and every MultiKueueCluster are Active. The manager's
    quotas are the workers' sum times `manager_factor` (1: what Kueue's docs advise)."""
    totals = {w: allocatable(apis[w]) for w in workers}
    for w in workers:
        apply(apis[w], [*tas_objects(), cluster_queue(totals[w], None), *namespaces_and_queues(namespaces)])
    whole = {r: manager_factor * sum(t[r] for t in totals.values()) for r in RESOURCES}
    secrets = [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": secret_name(w), "namespace": NAMESPACE},
                "type": "Opaque", "stringData": {"kubeconfig": json.dumps(kubeconfigs[w])}} for w in workers]
    apply(apis[manager], [*secrets, *tas_objects(), *manager_objects(workers), cluster_queue(whole, CHECK),
                          *namespaces_and_queues(namespaces)])
    for name, plural in ([(w, "clusterqueues") for w in workers] + [(manager, "clusterqueues")]):
        wait_active(apis[name], f"{API}/{plural}/{QUEUE}", f"ClusterQueue {QUEUE} on {name}", deadline)
    wait_active(apis[manager], f"{API}/admissionchecks/{CHECK}", f"AdmissionCheck {CHECK} on {manager}", deadline)
    for w in workers:
        wait_active(apis[manager], f"{API}/multikueueclusters/{w}", f"MultiKueueCluster {w} on {manager}", deadline)
    return totals


def condition(obj: dict, kind: str) -> dict:
    for c in (obj.get("status") or {}).get("conditions") or ():
        if c.get("type") == kind:
            return c
    return {}


def wait_active(api: Api, path: str, what: str, deadline: float) -> None:
    last: dict = {}
    while True:
        last = condition(api("GET", path), "Active")  # type: ignore[arg-type]
        if last.get("status") == "True":
            return
        if time.monotonic() > deadline:
            raise Fail(f"kueue: {what} not Active: {last.get('reason', 'no condition')}: "
                       f"{str(last.get('message', ''))[:200]}")
        time.sleep(0.2)
