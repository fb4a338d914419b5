"""The harness's writes: server-side apply ownership and conflicts, patches, finalizers, dry run."""
from tests.kubeapi.http import call

APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"
DEPLOYS = "/apis/apps/v1/namespaces/{}/deployments"


def deployment(ns, replicas=None, labels=None, image="nginx"):
    spec = {"selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": image}]}}}
    if replicas is not None:
        spec["replicas"] = replicas
    meta = {"name": "web", "namespace": ns, **({"labels": labels} if labels else {})}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": spec}


def replicas(n):
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}, "spec": {"replicas": n}}


def owners(obj):
    return {e["manager"]: e for e in obj["metadata"].get("managedFields", [])}


def test_server_side_apply_ownership_and_conflicts(kube_fleet, kube_ns):
    c = kube_fleet["alpha"]
    url = DEPLOYS.format(kube_ns) + "/web"
    code, obj = call(c, "PATCH", url, deployment(kube_ns, 2, {"team": "ml"}), APPLY, fieldManager="placer")
    assert code == 201 and obj["spec"]["replicas"] == 2
    assert owners(obj)["placer"]["operation"] == "Apply"
    assert owners(obj)["placer"]["fieldsV1"]["f:spec"]["f:replicas"] == {}
    # a different manager changing an owned field without force: 409 with causes
    code, status = call(c, "PATCH", url, replicas(3), APPLY, fieldManager="other")
    assert code == 409 and status["reason"] == "Conflict" and status["kind"] == "Status"
    causes = status["details"]["causes"]
    assert {x["field"] for x in causes} == {".spec.replicas"} and causes[0]["type"] == "FieldManagerConflict"
    assert 'conflict with "placer"' in status["message"]
    assert c.get("apps/v1", "Deployment", "web", kube_ns)["spec"]["replicas"] == 2
    # the same value is no conflict (shared ownership); force takes the field over
    assert call(c, "PATCH", url, replicas(2), APPLY, fieldManager="other")[0] == 200
    code, obj = call(c, "PATCH", url, replicas(5), APPLY, fieldManager="other", force="true")
    assert code == 200 and obj["spec"]["replicas"] == 5
    assert "f:replicas" not in owners(obj)["placer"]["fieldsV1"]["f:spec"]
    # placer re-applies without the label and without replicas: its label goes, other's replicas stays
    code, obj = call(c, "PATCH", url, deployment(kube_ns, None, None, image="nginx:2"), APPLY, fieldManager="placer")
    assert code == 200 and obj["spec"]["replicas"] == 5 and "team" not in obj["metadata"].get("labels", {})
    assert obj["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:2"
    # an ordinary update takes ownership without conflict; placer applying its old value then conflicts
    code, obj = call(c, "PATCH", url, {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}}},
                     MERGE, fieldManager="editor")
    assert code == 200 and owners(obj)["editor"]["operation"] == "Update"
    code, status = call(c, "PATCH", url, deployment(kube_ns, None, image="nginx:2"), APPLY, fieldManager="placer")
    assert code == 409 and 'conflict with "editor"' in status["message"]
    assert call(c, "PATCH", url, deployment(kube_ns), APPLY)[0] == 400        # fieldManager required


def test_apply_is_idempotent_and_status_is_separate(kube_fleet, kube_ns):
    c = kube_fleet["alpha"]
    url = f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{kube_ns}/jobsets/js"
    js = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js"},
          "spec": {"replicatedJobs": [{"name": "w", "replicas": 1}]}, "status": {"ignored": 1}}
    _, first = call(c, "PATCH", url, js, APPLY, fieldManager="placer")
    _, again = call(c, "PATCH", url, js, APPLY, fieldManager="placer")
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"] and "status" not in again
    code, obj = call(c, "PATCH", url + "/status", {**js, "status": {"phase": "Running"}}, APPLY, fieldManager="ctrl")
    assert code == 200 and obj["status"] == {"phase": "Running"} and obj["metadata"]["generation"] == 1
    assert owners(obj)["ctrl"]["subresource"] == "status"


def test_json_and_strategic_patches(kube_fleet, kube_ns):
    c = kube_fleet["alpha"]
    base = f"/api/v1/namespaces/{kube_ns}/configmaps"
    call(c, "POST", base, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"a": "1"}})
    ops = [{"op": "add", "path": "/data/b", "value": "2"}, {"op": "replace", "path": "/data/a", "value": "3"},
           {"op": "add", "path": "/metadata/labels", "value": {"x/y": "z"}}]
    code, obj = call(c, "PATCH", base + "/cm", ops, "application/json-patch+json")
    assert code == 200 and obj["data"] == {"a": "3", "b": "2"} and obj["metadata"]["labels"] == {"x/y": "z"}
    code, obj = call(c, "PATCH", base + "/cm", [{"op": "remove", "path": "/metadata/labels/x~1y"}],
                     "application/json-patch+json")
    assert code == 200 and obj["metadata"]["labels"] == {}
    code, status = call(c, "PATCH", base + "/cm", [{"op": "test", "path": "/data/a", "value": "9"}],
                        "application/json-patch+json")
    assert code == 422 and status["kind"] == "Status"
    code, obj = call(c, "PATCH", base + "/cm", {"data": {"a": None, "c": "4"}}, "application/strategic-merge-patch+json")
    assert code == 200 and obj["data"] == {"b": "2", "c": "4"}
    code, _ = call(c, "PATCH", f"/apis/ray.io/v1/namespaces/{kube_ns}/rayclusters/x", {"spec": {}},
                   "application/strategic-merge-patch+json")
    assert code == 404
    call(c, "POST", f"/apis/ray.io/v1/namespaces/{kube_ns}/rayclusters",
         {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "x"}, "spec": {}})
    code, status = call(c, "PATCH", f"/apis/ray.io/v1/namespaces/{kube_ns}/rayclusters/x", {"spec": {"a": 1}},
                        "application/strategic-merge-patch+json")
    assert code == 415 and status["reason"] == "UnsupportedMediaType"


def test_finalizers_hold_deletion_until_removed(fresh_fleet):
    c = fresh_fleet["alpha"]
    url = "/api/v1/namespaces/default/configmaps"
    call(c, "POST", url, {"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": "held", "finalizers": ["placer.dev/cleanup"]}})
    code, obj = call(c, "DELETE", url + "/held")
    assert code == 200 and obj["metadata"]["deletionTimestamp"]
    code, obj = call(c, "GET", url + "/held")
    assert code == 200 and obj["metadata"]["deletionTimestamp"] and obj["metadata"]["finalizers"]
    events = c.store.watch(c.store.type_for("v1", "ConfigMap"), "default", obj["metadata"]["resourceVersion"], timeout=2)
    code, _ = call(c, "PATCH", url + "/held", {"metadata": {"finalizers": None}}, MERGE)
    assert code == 200
    assert call(c, "GET", url + "/held")[0] == 404
    first = next(events)
    assert first["type"] == "DELETED" and first["object"]["metadata"]["name"] == "held"
    events.close()


def test_delete_preconditions_namespaces_and_dry_run(fresh_fleet):
    c = fresh_fleet["alpha"]
    url = "/api/v1/namespaces/team/configmaps"
    call(c, "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    code, cm = call(c, "POST", url, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}})
    code, status = call(c, "DELETE", url + "/a", {"preconditions": {"uid": "other"}})
    assert code == 409 and "Precondition" in status["message"]
    code, status = call(c, "DELETE", url + "/a", {"preconditions": {"uid": cm["metadata"]["uid"]}})
    assert code == 200 and status["kind"] == "Status" and status["status"] == "Success"
    code, cm = call(c, "POST", url, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}})
    code, _ = call(c, "POST", url, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dry"}}, dryRun="All")
    assert code == 201 and call(c, "GET", url + "/dry")[0] == 404
    assert call(c, "GET", "/api/v1/namespaces/team")[1]["status"] == {"phase": "Active"}
    assert call(c, "DELETE", "/api/v1/namespaces/team")[0] == 200
    assert call(c, "GET", url + "/a")[0] == 404          # namespace contents go with it
    code, obj = call(c, "POST", url, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"generateName": "gen-"}})
    assert code == 201 and obj["metadata"]["name"].startswith("gen-") and len(obj["metadata"]["name"]) == 9
    code, listing = call(c, "DELETE", url)
    assert code == 200 and call(c, "GET", url)[1]["items"] == []
