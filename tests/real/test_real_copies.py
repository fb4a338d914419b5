"""Copies valid on real clusters (issue 25): objects created on a real hub whose controllers run
(the session's `hub`: kube-controller-manager with every default controller), read back as the
daemon reads them, copied by `placer.actuate` and created on a real target (east), which must
accept each. The same Job copied with only the API server's metadata removed is refused by
east, as in the issue ("'selector' not auto-generated"): the judge can fail."""
from __future__ import annotations

import copy

import pytest

from placer import actuate as A
from placer.model.errors import KubeError, NotFound
from tests.daemon.daemon_helpers import gpu, pod_template
from tests.kubeenv import MODULE_CRDS, corpus_crds, module_crds, wait_for

pytestmark = pytest.mark.kube


def objects() -> list[dict]:
    return [
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "finetune-7b"},
         "spec": {"parallelism": 2, "completions": 2, "completionMode": "Indexed", "suspend": True,
                  "template": pod_template(1)}},
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "embed-svc"},
         "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "embed"}},
                  "template": {"metadata": {"labels": {"app": "embed"}}, "spec": {"containers": [
                      {"name": "m", "image": "m:1", "resources": gpu(2)}]}}}},
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "shards"},
         "spec": {"replicas": 0, "serviceName": "shards", "selector": {"matchLabels": {"app": "shards"}},
                  "template": {"metadata": {"labels": {"app": "shards"}}, "spec": {"containers": [
                      {"name": "s", "image": "s:1"}]}},
                  "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                      "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "frontend"},
         "spec": {"type": "NodePort", "selector": {"app": "embed"}, "ports": [{"port": 80, "targetPort": 8080}]}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "shards"},
         "spec": {"clusterIP": "None", "selector": {"app": "shards"}, "ports": [{"port": 80}]}},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "cache"},
         "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe"},
         "spec": {"containers": [{"name": "c", "image": "c:1"}]}},
    ]


def test_objects_from_a_hub_with_its_controllers_copy_onto_a_real_target(real):
    hub, east = real.client("hub"), real.client("east")
    ns_hub = real.namespace("hub", real.unique("copies"))
    ns_east = real.namespace("east", real.unique("copies"))
    made = []
    for obj in objects():
        res = hub.resource_for(obj["apiVersion"], obj["kind"])
        made.append((res, hub.create(res, obj, ns_hub)["metadata"]["name"]))
    # the hub's controllers have had their say: the Deployment's revision is written
    wait_for(lambda: (hub.get("deployments", "embed-svc", ns_hub)["metadata"].get("annotations") or {})
             .get("deployment.kubernetes.io/revision"), 60, "the hub's Deployment controller at work")
    read = {(res.kind, name): hub.get(res, name, ns_hub) | {"apiVersion": res.api_version, "kind": res.kind}
            for res, name in made}
    job = read[("Job", "finetune-7b")]
    assert "controller-uid" in str(job["spec"]["selector"])

    # only the server's metadata removed: east refuses the Job, as in the issue
    naive = _metadata_only(job)
    naive["metadata"]["namespace"] = ns_east
    with pytest.raises(KubeError) as refused:
        east.create(east.resource_for("batch/v1", "Job"), naive, ns_east)
    assert refused.value.status == 422 and "selector" in refused.value.message

    for (res, name), obj in zip(made, read.values()):
        clean = A.strip_server_fields(obj)
        clean["metadata"]["namespace"] = ns_east
        created = east.create(east.resource_for(res.api_version, res.kind), clean, ns_east)
        assert created["metadata"]["name"] == name
    assert east.get("services", "shards", ns_east)["spec"]["clusterIP"] == "None"


def test_every_catalog_kind_from_the_hub_copies_onto_a_real_target(real):
    """Every upstream example of every catalog kind with a CRD (../shared/corpus/upstream, read in
    place): created on the real hub (whose server validates, defaults and prunes it), read back as
    the daemon reads it, copied by placer.actuate and created on east, which must accept each."""
    from tests.real.test_real_crds import CRDS, examples

    if not CRDS:
        pytest.skip("no upstream CRDs (../shared/corpus/upstream) beside this checkout")
    crds = corpus_crds(f for paths in CRDS.values() for f in paths)     # those of kube-env's operators: their modules'
    real.install_crds("hub", crds)
    real.install_crds("east", crds)
    hub, east = real.client("hub"), real.client("east")
    copied: set[tuple[str, str]] = set()
    refused_by_hub: list[str] = []
    for kind_dir in sorted(CRDS):
        ns_hub = real.namespace("hub", real.unique(f"copies-{kind_dir}"))
        ns_east = real.namespace("east", real.unique(f"copies-{kind_dir}"))
        seen = set()
        for path, doc in examples(kind_dir):
            key = (doc["kind"], doc["metadata"].get("name") or doc["metadata"].get("generateName", ""))
            if key in seen:
                continue
            seen.add(key)
            res = hub.resource_for(doc["apiVersion"], doc["kind"])
            sent = copy.deepcopy(doc)
            sent["metadata"].pop("namespace", None)
            try:
                stored = hub.create(res, sent, ns_hub) | {"apiVersion": res.api_version, "kind": res.kind}
            except KubeError:
                refused_by_hub.append(f"{path.name}: {key[1]}")   # invalid upstream: never stageable
                continue
            clean = A.strip_server_fields(stored)
            clean["metadata"]["namespace"] = ns_east
            try:
                east.create(east.resource_for(res.api_version, res.kind), clean, ns_east)
            except KubeError as e:
                raise AssertionError(f"{path.name}: {res.kind}/{key[1]}: east refused the copy: {e}") from None
            copied.add((res.api_version, res.kind))
    assert len(copied) >= 10, copied                  # JobSet, LWS, Ray, Kubeflow, KServe, Knative...
    assert len(refused_by_hub) <= 2, refused_by_hub   # the upstream examples their own CRDs refuse


# the bundled examples of the kinds whose operators kube-env builds: no ../shared needed
SERVED_EXAMPLES = ("jobset", "leaderworkerset", "raycluster", "rayjob", "rayservice", "pytorchjob", "mpijob")


def test_bundled_examples_of_served_kinds_copy_onto_a_real_target(real):
    """The repo's own example of every kind whose operator kube-env builds, with that operator's CRD
    from its pinned module: created on the real hub, read back, copied by placer.actuate and
    created on east, which must accept each (the corpus test above needs ../shared)."""
    from pathlib import Path

    import yaml

    operators = ",".join(dict.fromkeys(MODULE_CRDS.values()))
    crds = [c for c in module_crds(operators) if c["metadata"]["name"] in MODULE_CRDS]
    real.install_crds("hub", crds)
    real.install_crds("east", crds)
    hub, east = real.client("hub"), real.client("east")
    ns_hub, ns_east = real.namespace("hub", real.unique("served")), real.namespace("east", real.unique("served"))
    examples_dir = Path(__file__).resolve().parents[2] / "examples"
    copied = set()
    for name in SERVED_EXAMPLES:
        for doc in yaml.safe_load_all((examples_dir / f"{name}.yaml").read_text()):
            if not doc or f"{doc['kind'].lower()}s.{doc['apiVersion'].split('/')[0]}" not in MODULE_CRDS:
                continue                                  # companions (ConfigMaps, Services) stay out
            res = hub.resource_for(doc["apiVersion"], doc["kind"])
            sent = copy.deepcopy(doc)
            sent["metadata"].pop("namespace", None)
            stored = hub.create(res, sent, ns_hub) | {"apiVersion": res.api_version, "kind": res.kind}
            clean = A.strip_server_fields(stored)
            clean["metadata"]["namespace"] = ns_east
            created = east.create(east.resource_for(res.api_version, res.kind), clean, ns_east)
            assert created["metadata"]["name"] == doc["metadata"]["name"]
            copied.add(doc["kind"])
    assert copied == {"JobSet", "LeaderWorkerSet", "RayCluster", "RayJob", "RayService", "PyTorchJob", "MPIJob"}


def _metadata_only(obj: dict) -> dict:
    """The copy as placer made it before issue 25: the API server's metadata and status out."""
    out = copy.deepcopy(obj)
    out.pop("status", None)
    for f in A.SERVER_FIELDS:
        out["metadata"].pop(f, None)
    return out


def test_a_namespace_remembered_then_deleted_is_created_again_on_a_real_target(real):
    """The daemon remembers the namespaces it ensured on each cluster (issue 24: one target
    request less per copy). Deleted since on a real target, the server-side apply there says
    404; the namespace is created again and the copy applied: placed, not refused."""
    east = real.client("east")
    ns = real.unique("remembered")
    known = A.Namespaces()

    def cm(name: str) -> dict:
        return {"apiVersion": "v1", "kind": "ConfigMap", "data": {"k": "v"},
                "metadata": {"name": name, "namespace": ns, "labels": {A.MANAGED: "true", A.GROUP: name}}}
    [first] = A.apply_group(east, [cm("one")], group_key="one", namespaces=known)
    assert first.created and ns in known
    east.delete("namespaces", ns)
    wait_for(lambda: _gone(east, ns), 120, "the namespace deleted on east")
    [second] = A.apply_group(east, [cm("two")], group_key="two", namespaces=known)
    assert second.created and ns in known
    assert east.get("namespaces", ns)["metadata"]["labels"][A.MANAGED] == "true"
    assert east.get("configmaps", "two", ns)["data"] == {"k": "v"}


def _gone(client, ns: str) -> bool:
    try:
        client.get("namespaces", ns)
    except NotFound:
        return True
    return False
