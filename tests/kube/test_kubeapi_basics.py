"""The harness itself: discovery, CRUD, bookkeeping, CRDs, Status bodies, kubeconfig."""
import yaml

from tests.kubeapi import bound_pod, crd, custom_object, gpu_node
from tests.kubeapi.http import call

PODS = "/api/v1/namespaces/{}/pods"
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/{}/jobsets"


def test_kubeconfig_has_one_context_per_cluster(kube_fleet):
    cfg = yaml.safe_load(kube_fleet.kubeconfig.read_text())
    assert [c["name"] for c in cfg["contexts"]] == ["alpha", "beta", "gamma"]
    servers = {c["name"]: c["cluster"]["server"] for c in cfg["clusters"]}
    assert servers == {c.name: f"http://127.0.0.1:{c.port}" for c in kube_fleet}
    assert len(set(servers.values())) == 3
    assert cfg["current-context"] == "alpha"


def test_clusters_are_independent(fresh_fleet, kube_ns):
    alpha, beta = fresh_fleet["alpha"], fresh_fleet["beta"]
    code, _ = call(alpha, "POST", PODS.format(kube_ns), bound_pod("p", None, namespace=kube_ns))
    assert code == 201
    assert call(alpha, "GET", PODS.format(kube_ns) + "/p")[0] == 200
    assert call(beta, "GET", PODS.format(kube_ns) + "/p")[0] == 404


def test_discovery_lists_builtins_and_catalog_crds(kube_fleet):
    c = kube_fleet["alpha"]
    _, core = call(c, "GET", "/api/v1")
    pods = next(r for r in core["resources"] if r["name"] == "pods")
    assert pods["namespaced"] and pods["kind"] == "Pod" and "watch" in pods["verbs"] and pods["shortNames"] == ["po"]
    assert any(r["name"] == "pods/status" for r in core["resources"])
    _, groups = call(c, "GET", "/apis")
    names = {g["name"]: g for g in groups["groups"]}
    for group in ("apps", "batch", "coordination.k8s.io", "apiextensions.k8s.io", "jobset.x-k8s.io", "kubeflow.org",
                  "ray.io", "leaderworkerset.x-k8s.io", "serving.kserve.io", "serving.knative.dev",
                  "apps.nvidia.com", "milvus.io", "grove.io", "nvidia.com"):
        assert group in names, group
    assert names["nvidia.com"]["preferredVersion"]["version"] == "v1beta1"
    _, ksvc = call(c, "GET", "/apis/serving.knative.dev/v1")
    svc = next(r for r in ksvc["resources"] if r["name"] == "services")
    assert svc["kind"] == "Service" and "ksvc" in svc["shortNames"]
    _, js = call(c, "GET", "/apis/jobset.x-k8s.io/v1alpha2")
    assert {r["name"] for r in js["resources"]} == {"jobsets", "jobsets/status"}
    assert call(c, "GET", "/version")[1]["major"] == "1"
    assert call(c, "GET", "/apis/nope.example.com/v1")[0] == 404


def test_creating_a_crd_registers_it_and_deleting_removes_it(fresh_fleet):
    c = fresh_fleet["alpha"]
    widget = crd("example.com", "Widget", "widgets", short_names=("wd",), scope="Cluster", status=False)
    assert call(c, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", widget)[0] == 201
    _, res = call(c, "GET", "/apis/example.com/v1")
    assert res["resources"] == [{"name": "widgets", "singularName": "widget", "namespaced": False,
                                 "kind": "Widget", "verbs": res["resources"][0]["verbs"], "shortNames": ["wd"]}]
    code, obj = call(c, "POST", "/apis/example.com/v1/widgets",
                     {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}})
    assert code == 201 and "namespace" not in obj["metadata"]
    _, got = call(c, "GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com")
    assert {x["type"] for x in got["status"]["conditions"]} == {"Established", "NamesAccepted"}
    code, status = call(c, "DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com")
    assert code == 200 and status["status"] == "Success" and status["details"]["name"] == "widgets.example.com"
    assert call(c, "GET", "/apis/example.com/v1")[0] == 404
    assert [e.type for e in c.store.events[-2:]] == ["DELETED", "DELETED"]     # the CRD, then its objects
    rvs = [e.rv for e in c.store.events]
    assert rvs == sorted(rvs)
    bad = crd("example.com", "Gadget", "gadgets")
    bad["metadata"]["name"] = "wrong"
    code, status = call(c, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", bad)
    assert code == 422 and status["reason"] == "Invalid" and status["details"]["causes"][0]["field"] == "metadata.name"


def test_create_get_update_bookkeeping(kube_fleet, kube_ns):
    c = kube_fleet["alpha"]
    code, created = call(c, "POST", JOBSETS.format(kube_ns),
                         {**custom_object("jobset.x-k8s.io/v1alpha2", "JobSet", "js", kube_ns, {"a": 1}),
                          "status": {"ignored": True}})
    meta = created["metadata"]
    assert code == 201 and meta["generation"] == 1 and meta["uid"] and meta["creationTimestamp"]
    assert "status" not in created          # CRD with status subresource: status dropped on create
    url = JOBSETS.format(kube_ns) + "/js"
    labelled = call(c, "PATCH", url, {"metadata": {"labels": {"x": "y"}}}, "application/merge-patch+json")[1]
    assert labelled["metadata"]["generation"] == 1
    assert int(labelled["metadata"]["resourceVersion"]) > int(meta["resourceVersion"])
    changed = call(c, "PATCH", url, {"spec": {"a": 2}, "status": {"s": 1}}, "application/merge-patch+json")[1]
    assert changed["metadata"]["generation"] == 2 and "status" not in changed
    same = call(c, "PATCH", url, {"spec": {"a": 2}}, "application/merge-patch+json")[1]
    assert same["metadata"]["resourceVersion"] == changed["metadata"]["resourceVersion"]   # no-op write
    code, status = call(c, "PUT", url, {**changed, "metadata": {**changed["metadata"], "resourceVersion": "1"}})
    assert code == 409 and status["reason"] == "Conflict" and "modified" in status["message"]
    unconditional = {**changed, "metadata": {k: v for k, v in changed["metadata"].items() if k != "resourceVersion"}}
    assert call(c, "PUT", url, unconditional)[0] == 422       # CRDs require resourceVersion on update
    code, put = call(c, "PUT", url, {**changed, "spec": {"a": 3}})
    assert code == 200 and put["metadata"]["generation"] == 3 and put["metadata"]["uid"] == meta["uid"]
    code, status = call(c, "POST", JOBSETS.format(kube_ns), custom_object("jobset.x-k8s.io/v1alpha2", "JobSet", "js", kube_ns))
    assert code == 409 and status["reason"] == "AlreadyExists"


def test_status_subresource_changes_only_status(kube_fleet, kube_ns):
    c = kube_fleet["alpha"]
    url = JOBSETS.format(kube_ns) + "/js"
    call(c, "POST", JOBSETS.format(kube_ns), custom_object("jobset.x-k8s.io/v1alpha2", "JobSet", "js", kube_ns, {"a": 1}))
    code, obj = call(c, "PATCH", url + "/status", {"spec": {"a": 9}, "metadata": {"labels": {"l": "v"}},
                                                   "status": {"phase": "Done"}}, "application/merge-patch+json")
    assert code == 200 and obj["status"] == {"phase": "Done"} and obj["spec"] == {"a": 1}
    assert "labels" not in obj["metadata"] and obj["metadata"]["generation"] == 1
    code, obj = call(c, "PUT", url + "/status", {**obj, "status": {"phase": "Again"}})
    assert code == 200 and obj["status"] == {"phase": "Again"}
    assert call(c, "GET", "/api/v1/namespaces/x/configmaps/y/status")[0] == 404


def test_http_create_of_a_pod_starts_pending_and_seed_keeps_status(fresh_fleet):
    c = fresh_fleet["alpha"]
    _, created = call(c, "POST", PODS.format("default"), bound_pod("p", "n1", phase="Running"))
    assert created["status"] == {"phase": "Pending"}
    c.seed([gpu_node("n1", gpus=4), bound_pod("q", "n1", gpus=2)])
    assert c.get("v1", "Pod", "q", "default")["status"]["phase"] == "Running"
    _, node = call(c, "GET", "/api/v1/nodes/n1")
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "4"
    assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"


def test_errors_are_status_objects(kube_fleet):
    c = kube_fleet["alpha"]
    code, status = call(c, "GET", "/api/v1/namespaces/default/pods/missing")
    assert code == 404 and status == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                      "message": 'pods "missing" not found', "reason": "NotFound", "code": 404,
                                      "details": {"name": "missing", "group": "", "kind": "pods"}}
    code, status = call(c, "POST", PODS.format("default"), {"apiVersion": "v1", "kind": "Pod", "metadata": {}})
    assert code == 422 and status["reason"] == "Invalid"
    code, status = call(c, "POST", PODS.format("default"), {**bound_pod("BadName", None)})
    assert code == 422
    code, status = call(c, "GET", "/api/v1/nopes")
    assert code == 404 and status["kind"] == "Status"
    code, status = call(c, "PATCH", PODS.format("default") + "/x", "{}", "text/plain")
    assert code == 415


def test_multi_version_crd_shares_storage(kube_fleet, kube_ns):
    c = kube_fleet["alpha"]
    base = "/apis/nvidia.com/{}/namespaces/" + kube_ns + "/dynamographdeployments"
    obj = custom_object("nvidia.com/v1alpha1", "DynamoGraphDeployment", "dgd", kube_ns, {"services": {}})
    assert call(c, "POST", base.format("v1alpha1"), obj)[0] == 201
    _, got = call(c, "GET", base.format("v1beta1") + "/dgd")
    assert got["apiVersion"] == "nvidia.com/v1beta1" and got["spec"] == {"services": {}}


def test_token_auth(make_fleet):
    fleet = make_fleet(["secure"], crds=False, tokens=True)
    c = fleet["secure"]
    cfg = yaml.safe_load(fleet.kubeconfig.read_text())
    assert cfg["users"][0]["user"]["token"] == c.token
    assert call(c, "GET", "/api/v1/nodes")[0] == 200
    assert call(c, "GET", "/api/v1/nodes", token="wrong")[0] == 401
