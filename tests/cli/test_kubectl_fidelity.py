"""Fidelity of the test API server: the real kubectl and the official Python client drive the same
endpoints and must see the same objects. Skipped where kubectl is not installed."""
from __future__ import annotations

import json
import subprocess
import threading
import time

import pytest
import yaml

from tests.kubeapi import bound_pod, gpu_node

TIMEOUT = 60

NAMESPACE = "apiVersion: v1\nkind: Namespace\nmetadata: {name: fid}\n"
MANIFEST = """
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: train
  namespace: fid
  labels: {app: train}
spec:
  replicatedJobs:
  - name: workers
    replicas: 2
    template:
      spec:
        parallelism: 2
        completions: 2
        template:
          metadata: {labels: {app: train}}
          spec:
            restartPolicy: Never
            containers:
            - name: main
              image: registry.example/train:1
              resources: {limits: {nvidia.com/gpu: "8"}}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: fid
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: c, image: nginx}]
"""


class Kubectl:
    def __init__(self, binary, kubeconfig, cache_dir):
        self.base = [binary, "--kubeconfig", str(kubeconfig), "--cache-dir", str(cache_dir)]

    def run(self, *args, input=None, check=True) -> subprocess.CompletedProcess:
        proc = subprocess.run([*self.base, *args], input=input, capture_output=True, text=True, timeout=TIMEOUT)
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({proc.returncode}): {proc.stderr}")
        return proc

    def json(self, *args):
        return json.loads(self.run(*args, "-o", "json").stdout)


@pytest.fixture
def fleet(make_fleet):
    return make_fleet(["alpha", "beta"])


@pytest.fixture
def k(kubectl, fleet, tmp_path):
    return Kubectl(kubectl, fleet.kubeconfig, tmp_path / "kubectl-cache")


@pytest.fixture
def dyn(fleet, tmp_path):
    """context name -> kubernetes.dynamic.DynamicClient"""
    from kubernetes import config, dynamic

    def make(context):
        api = config.new_client_from_config(str(fleet.kubeconfig), context=context)
        return dynamic.DynamicClient(api, cache_file=str(tmp_path / f"discovery-{context}.json"))
    return make


def strip(obj: dict) -> dict:
    """An object as kubectl shows it by default (managedFields hidden)."""
    obj = json.loads(json.dumps(obj))
    obj["metadata"].pop("managedFields", None)
    return obj


def test_apply_server_side_then_both_see_the_same_objects(k, dyn, fleet):
    k.run("--context", "beta", "apply", "--server-side", "-f", "-", input=NAMESPACE)
    out = k.run("--context", "beta", "apply", "--server-side", "-f", "-", input=MANIFEST).stdout
    assert "jobset.jobset.x-k8s.io/train serverside-applied" in out
    assert "deployment.apps/web serverside-applied" in out
    client = dyn("beta")
    jobsets = client.resources.get(api_version="jobset.x-k8s.io/v1alpha2", kind="JobSet")
    py = jobsets.get(name="train", namespace="fid").to_dict()
    kc = k.json("--context", "beta", "get", "jobset", "train", "-n", "fid")
    assert strip(py) == kc
    assert py["metadata"]["managedFields"][0]["manager"] == "kubectl"
    assert py["metadata"]["managedFields"][0]["operation"] == "Apply"
    deploy = client.resources.get(api_version="apps/v1", kind="Deployment").get(name="web", namespace="fid")
    assert strip(deploy.to_dict()) == k.json("--context", "beta", "get", "deploy/web", "-n", "fid")
    # the other cluster is untouched
    assert k.run("--context", "alpha", "get", "jobsets", "-A", "-o", "name").stdout == ""
    assert fleet["beta"].requests.count(verb="patch", resource="jobsets") == 1


def test_label_status_patch_and_delete(k, dyn):
    # kubectl reports a missing namespace rather than a missing object; `kubectl create namespace` would
    # send protobuf, which the harness does not decode (415), so apply it
    k.run("apply", "--server-side", "-f", "-", input=NAMESPACE)
    k.run("apply", "--server-side", "-f", "-", input=MANIFEST)
    client = dyn("alpha")
    jobsets = client.resources.get(api_version="jobset.x-k8s.io/v1alpha2", kind="JobSet")
    k.run("label", "jobset", "train", "-n", "fid", "team=ml")
    labelled = jobsets.get(name="train", namespace="fid")
    assert labelled.metadata.labels["team"] == "ml" and labelled.metadata.generation == 1
    managers = {e["manager"] for e in labelled.to_dict()["metadata"]["managedFields"]}
    assert managers == {"kubectl", "kubectl-label"}
    k.run("patch", "jobset", "train", "-n", "fid", "--subresource=status", "--type=merge",
          "-p", '{"status": {"replicatedJobsStatus": [{"name": "workers", "ready": 2}]}, "spec": {"x": 1}}')
    patched = jobsets.get(name="train", namespace="fid").to_dict()
    assert patched["status"]["replicatedJobsStatus"][0]["ready"] == 2
    assert "x" not in patched["spec"] and patched["metadata"]["generation"] == 1
    assert k.json("get", "jobset", "train", "-n", "fid")["status"] == patched["status"]
    out = k.run("delete", "jobset", "train", "-n", "fid").stdout
    assert 'jobset.jobset.x-k8s.io "train" deleted' in out
    assert jobsets.get(namespace="fid").to_dict()["items"] == []
    err = k.run("get", "jobset", "train", "-n", "fid", check=False)
    assert err.returncode == 1
    assert 'Error from server (NotFound): jobsets.jobset.x-k8s.io "train" not found' in err.stderr


def test_ssa_conflict_between_placer_and_kubectl(k, dyn):
    client = dyn("alpha")
    deployments = client.resources.get(api_version="apps/v1", kind="Deployment")
    body = yaml.safe_load(MANIFEST.split("---")[1])
    body["spec"]["replicas"] = 3
    deployments.server_side_apply(body=body, namespace="fid", field_manager="placer")
    proc = k.run("apply", "--server-side", "-f", "-", input=MANIFEST, check=False)
    assert proc.returncode != 0
    assert "conflict" in proc.stderr.lower() and '"placer"' in proc.stderr and ".spec.replicas" in proc.stderr
    k.run("apply", "--server-side", "--force-conflicts", "-f", "-", input=MANIFEST)
    got = deployments.get(name="web", namespace="fid").to_dict()
    assert got["spec"]["replicas"] == 2
    replicas_owners = [e["manager"] for e in got["metadata"]["managedFields"]
                       if "f:replicas" in e["fieldsV1"].get("f:spec", {})]
    assert replicas_owners == ["kubectl"]


def test_lists_selectors_and_pagination_agree(k, dyn, fleet):
    objs = [gpu_node(f"n{i:03d}", gpus=8, labels={"pool": "a" if i % 2 else "b"}) for i in range(120)]
    objs += [bound_pod(f"p{i:03d}", f"n{i % 120:03d}", gpus=1, namespace="work", labels={"app": "x" if i % 3 else "y"},
                       phase="Running" if i % 5 else "Succeeded") for i in range(300)]
    fleet["alpha"].seed(objs)
    fleet["alpha"].requests.clear()
    pods = k.json("get", "pods", "-A", "--chunk-size=50")
    assert len(pods["items"]) == 300
    assert fleet["alpha"].requests.count(verb="list", resource="pods") == 6        # followed continue tokens
    client = dyn("alpha")
    nodes_api = client.resources.get(api_version="v1", kind="Node")
    pods_api = client.resources.get(api_version="v1", kind="Pod")
    names = lambda items: sorted(o["metadata"]["name"] for o in items)
    assert names(k.json("get", "nodes", "-l", "pool=a")["items"]) == \
        names(nodes_api.get(label_selector="pool=a").to_dict()["items"])
    for labels, fields, expected in (("app in (x)", "status.phase!=Succeeded,spec.nodeName=n011", 3),
                                     ("app notin (x),!missing", "status.phase=Succeeded", 20)):
        selected = k.json("get", "pods", "-n", "work", "-l", labels, "--field-selector", fields)["items"]
        assert names(selected) == names(pods_api.get(namespace="work", label_selector=labels,
                                                     field_selector=fields).to_dict()["items"])
        assert len(selected) == expected


def test_short_names_and_api_resources(k, fleet):
    out = k.run("api-resources").stdout
    for line in ("dynamographdeployments", "leaderworkersets", "inferenceservices"):
        assert line in out
    fleet["alpha"].seed([{"apiVersion": "serving.knative.dev/v1", "kind": "Service",
                          "metadata": {"name": "hello", "namespace": "default"}, "spec": {}},
                         {"apiVersion": "nvidia.com/v1beta1", "kind": "DynamoGraphDeployment",
                          "metadata": {"name": "graph", "namespace": "default"}, "spec": {}}])
    assert k.run("get", "ksvc", "-o", "name").stdout.strip() == "service.serving.knative.dev/hello"
    assert k.run("get", "dgd", "-o", "name").stdout.strip() == "dynamographdeployment.nvidia.com/graph"
    assert "hello" in k.run("get", "ksvc").stdout          # table output (server sends plain lists)


def test_watch_reads_one_event(k, kubectl, fleet, dyn):
    """kubectl get --watch prints the event for an object created through the Python client."""
    proc = subprocess.Popen([*k.base, "get", "jobsets", "-n", "fid", "--watch-only", "--output-watch-events",
                             "-o", "json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + TIMEOUT
        while fleet["alpha"].requests.count(verb="watch", resource="jobsets") == 0:
            assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read() if proc.poll() else "no watch"
            time.sleep(0.05)
        client = dyn("alpha")
        client.resources.get(api_version="jobset.x-k8s.io/v1alpha2", kind="JobSet").create(
            body=yaml.safe_load(MANIFEST.split("---")[0]), namespace="fid")
        event = read_one_json(proc, TIMEOUT)
    finally:
        proc.kill()
        proc.wait(TIMEOUT)
    assert event["type"] == "ADDED" and event["object"]["metadata"]["name"] == "train"
    assert event["object"]["metadata"]["uid"] == fleet["alpha"].get(
        "jobset.x-k8s.io/v1alpha2", "JobSet", "train", "fid")["metadata"]["uid"]


def read_one_json(proc, timeout):
    """The first complete JSON document on a process's stdout (kubectl pretty-prints over many lines)."""
    result: dict = {}

    def reader():
        buf, decoder = "", json.JSONDecoder()
        for line in proc.stdout:
            buf += line
            try:
                result["doc"], _ = decoder.raw_decode(buf.lstrip())
                return
            except ValueError:
                continue
    t = threading.Thread(target=reader, daemon=True)
    t.start()
    t.join(timeout)
    assert "doc" in result, "kubectl printed no watch event in time"
    return result["doc"]


def test_finalizer_deletion_seen_by_both(k, dyn):
    client = dyn("alpha")
    cms = client.resources.get(api_version="v1", kind="ConfigMap")
    cms.create(body={"apiVersion": "v1", "kind": "ConfigMap",
                     "metadata": {"name": "held", "namespace": "default", "finalizers": ["placer.dev/x"]}},
               namespace="default")
    k.run("delete", "configmap", "held", "--wait=false")
    shown = k.json("get", "configmap", "held")
    assert shown["metadata"]["deletionTimestamp"] == cms.get(name="held", namespace="default").metadata.deletionTimestamp
    k.run("patch", "configmap", "held", "--type=merge", "-p", '{"metadata": {"finalizers": null}}')
    assert k.run("get", "configmap", "held", check=False).returncode == 1
    with pytest.raises(Exception) as err:
        cms.get(name="held", namespace="default")
    assert getattr(err.value, "status", None) == 404
