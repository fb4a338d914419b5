"""placer.actuate.generated (pure): a copy carries nothing the source cluster's server or
controllers generated, for every kind that has such fields, and keeps what the user wrote.

The objects below are as a real kube-apiserver (v1.37) returns them after create, with its
controllers running (`kubectl get -o yaml` on the hub of issue 25)."""
from __future__ import annotations

import copy

import pytest

from placer import actuate as A
from placer.definitions.catalog import load_catalog
from placer.inputs.manifests import Document, classify, group

UID = "0d7e5f3c-8f0e-4d43-9c1b-3b5a2f1e6a11"


def hub_job(manual: bool = False) -> dict:
    """A Job as the hub's API server stores it: selector and labels generated from its uid."""
    gen = {"batch.kubernetes.io/controller-uid": UID, "batch.kubernetes.io/job-name": "finetune-7b",
           "controller-uid": UID, "job-name": "finetune-7b"}
    spec = {"completions": 2, "parallelism": 2, "completionMode": "Indexed", "suspend": True,
            "backoffLimit": 6, "podReplacementPolicy": "TerminatingOrFailed",
            "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": UID}},
            "template": {"metadata": {"labels": {**gen, "app": "ft"}},
                         "spec": {"restartPolicy": "Never", "containers": [
                             {"name": "t", "image": "t:1", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}
    if manual:
        spec["manualSelector"] = True
        spec["selector"] = {"matchLabels": {"app": "ft"}}
        spec["template"]["metadata"]["labels"] = {"app": "ft", "job-name": "mine"}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "finetune-7b", "namespace": "placer-staging", "uid": UID, "generation": 1,
                         "resourceVersion": "812", "creationTimestamp": "2026-12-05T10:00:00Z",
                         "labels": dict(gen) if not manual else {"team": "a"}},
            "spec": spec, "status": {}}


def test_a_job_copy_leaves_the_generated_selector_and_labels():
    out = A.strip_server_fields(hub_job())
    assert "selector" not in out["spec"]
    assert out["spec"]["template"]["metadata"]["labels"] == {"app": "ft"}
    assert "labels" not in out["metadata"]
    assert out["spec"]["completionMode"] == "Indexed"        # user intent stays


def test_a_job_with_manual_selector_keeps_it():
    src = hub_job(manual=True)
    out = A.strip_server_fields(src)
    assert out["spec"]["selector"] == {"matchLabels": {"app": "ft"}}
    assert out["spec"]["template"]["metadata"]["labels"] == {"app": "ft", "job-name": "mine"}
    assert out["metadata"]["labels"] == {"team": "a"}


def test_the_source_object_is_not_changed():
    src = hub_job()
    before = copy.deepcopy(src)
    A.strip_server_fields(src)
    assert src == before


def test_service_cluster_ips_and_node_ports_stay_home():
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "n"},
           "spec": {"type": "LoadBalancer", "clusterIP": "10.0.0.17", "clusterIPs": ["10.0.0.17"],
                    "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack", "healthCheckNodePort": 31000,
                    "externalTrafficPolicy": "Local",
                    "ports": [{"port": 80, "targetPort": 8080, "nodePort": 30080, "protocol": "TCP"}],
                    "selector": {"app": "x"}}}
    out = A.strip_server_fields(svc)
    assert not {"clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy", "healthCheckNodePort"} & set(out["spec"])
    assert out["spec"]["ports"] == [{"port": 80, "targetPort": 8080, "protocol": "TCP"}]
    assert out["spec"]["externalTrafficPolicy"] == "Local"


def test_a_headless_or_dual_stack_service_keeps_what_the_user_chose():
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
           "spec": {"clusterIP": "None", "clusterIPs": ["None"], "ipFamilyPolicy": "RequireDualStack",
                    "ipFamilies": ["IPv4", "IPv6"], "ports": [{"port": 80}]}}
    out = A.strip_server_fields(svc)
    assert out["spec"]["clusterIP"] == "None" and out["spec"]["clusterIPs"] == ["None"]
    assert out["spec"]["ipFamilyPolicy"] == "RequireDualStack" and out["spec"]["ipFamilies"] == ["IPv4", "IPv6"]


def test_pod_leaves_the_service_account_token_volume():
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c", "image": "i", "volumeMounts": [
               {"name": "kube-api-access-x7k2q", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                "readOnly": True}, {"name": "data", "mountPath": "/data"}]}],
                    "volumes": [{"name": "kube-api-access-x7k2q", "projected": {"sources": [
                        {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}]}},
                        {"name": "data", "emptyDir": {}}]}}
    out = A.strip_server_fields(pod)
    assert out["spec"]["volumes"] == [{"name": "data", "emptyDir": {}}]
    assert out["spec"]["containers"][0]["volumeMounts"] == [{"name": "data", "mountPath": "/data"}]


def test_claims_statefulsets_and_deployments_leave_controller_fields():
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
           "metadata": {"name": "c", "annotations": {"pv.kubernetes.io/bind-completed": "yes",
                                                     "volume.kubernetes.io/storage-provisioner": "x", "k": "v"}},
           "spec": {"volumeName": "pvc-123", "resources": {"requests": {"storage": "1Gi"}}}}
    out = A.strip_server_fields(pvc)
    assert "volumeName" not in out["spec"] and out["metadata"]["annotations"] == {"k": "v"}
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"},
           "spec": {"volumeClaimTemplates": [{"metadata": {"name": "d", "creationTimestamp": None},
                                              "spec": {}, "status": {"phase": "Pending"}}]}}
    assert A.strip_server_fields(sts)["spec"]["volumeClaimTemplates"] == [{"metadata": {"name": "d"}, "spec": {}}]
    dep = {"apiVersion": "apps/v1", "kind": "Deployment",
           "metadata": {"name": "d", "annotations": {"deployment.kubernetes.io/revision": "1"}}, "spec": {}}
    assert "annotations" not in A.strip_server_fields(dep)["metadata"]


@pytest.mark.parametrize("api,kind", [("batch/v1", "Job"), ("jobset.x-k8s.io/v1alpha2", "JobSet")])
def test_placers_managed_by_never_travels_but_anyone_elses_does(api, kind):
    obj = {"apiVersion": api, "kind": kind, "metadata": {"name": "x"}, "spec": {"managedBy": A.MANAGED_BY}}
    assert "managedBy" not in A.strip_server_fields(obj)["spec"]
    obj["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    assert A.strip_server_fields(obj)["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"


def test_prepared_job_copy_is_clean_and_unsuspended():
    """Through prepare_objects, as the daemon and submit create copies."""
    catalog = load_catalog()
    (g,) = group(classify([Document(hub_job(), "hub", 1)], catalog))
    (obj,) = A.prepare_objects(g, None, catalog, plan_id="p", cluster="east")
    assert "selector" not in obj["spec"] and obj["spec"]["suspend"] is False
    labels = obj["spec"]["template"]["metadata"]["labels"]
    assert not set(labels) & set(A.generated.JOB_GENERATED_LABELS)
    assert not set(obj["metadata"]["labels"]) & set(A.generated.JOB_GENERATED_LABELS)
