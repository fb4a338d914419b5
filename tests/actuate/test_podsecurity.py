"""Pod Security Standards as placer checks them before creating anything, and the level it
enforces on the namespaces it creates. The checks follow the standard's published tables
(kubernetes.io/docs/concepts/security/pod-security-standards); with real control planes
the cluster's own PodSecurity admission judges the same pods (tests marked kube)."""

from __future__ import annotations

import copy
import json

import pytest

from placer import actuate as A
from placer.actuate.podsecurity import LABEL, object_violations, pod_specs, violations
from tests.actuate.test_submit import ENTRIES, JOBSET, Env, jobset, write

PLAIN = {"containers": [{"name": "train", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 8}}}]}
RESTRICTED = {
    "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
    "containers": [{"name": "train", "image": "x", "securityContext": {
        "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}}],
    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}, {"name": "shm", "emptyDir": {}}]}


def with_(spec: dict, path: str, value) -> dict:
    out = copy.deepcopy(spec)
    parts = path.split(".")
    target = out
    for p in parts[:-1]:
        target = target[int(p)] if p.isdigit() else target.setdefault(p, {})
    target[parts[-1]] = value
    return out


BASELINE_BREAKS = [
    ("containers.0.securityContext", {"privileged": True}, "privileged"),
    ("hostNetwork", True, "hostNetwork: true"),
    ("hostPID", True, "hostPID: true"),
    ("volumes", [{"name": "dev", "hostPath": {"path": "/dev"}}], "hostPath volume 'dev'"),
    ("containers.0.securityContext", {"capabilities": {"add": ["SYS_ADMIN"]}}, "SYS_ADMIN"),
    ("containers.0.ports", [{"containerPort": 80, "hostPort": 80}], "hostPort 80"),
    ("securityContext", {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}, "unsafe sysctl 'kernel.msgmax'"),
    ("securityContext", {"seccompProfile": {"type": "Unconfined"}}, "seccompProfile Unconfined"),
    ("containers.0.securityContext", {"procMount": "Unmasked"}, "procMount 'Unmasked'"),
    ("initContainers", [{"name": "setup", "image": "x", "securityContext": {"privileged": True}}],
     "initContainers[setup]: privileged"),
]


@pytest.mark.parametrize("path,value,expected", BASELINE_BREAKS)
def test_baseline_forbids_what_takes_over_a_node(path, value, expected):
    spec = with_(PLAIN, path, value)
    assert any(expected in v for v in violations(spec, "baseline")), violations(spec, "baseline")
    assert any(expected in v for v in violations(spec, "restricted"))
    assert violations(spec, "privileged") == []


def test_ordinary_gpu_pods_pass_baseline_and_restricted_needs_its_settings():
    assert violations(PLAIN, "baseline") == []
    assert {v.split(": ", 1)[1] for v in violations(PLAIN, "restricted")} == {
        "allowPrivilegeEscalation is not false", "runAsNonRoot is not true",
        "seccompProfile is not RuntimeDefault or Localhost", "capabilities do not drop ALL"}
    assert violations(RESTRICTED, "restricted") == []
    assert any("volume 'x' of type nfs" in v for v in violations(
        with_(RESTRICTED, "volumes", [{"name": "x", "nfs": {"server": "s", "path": "/"}}]), "restricted"))
    assert any("runAsNonRoot is not true" in v for v in violations(
        with_(RESTRICTED, "containers.0.securityContext.runAsNonRoot", False), "restricted"))


def test_pod_specs_are_found_wherever_an_object_embeds_them():
    obj = json.loads(jobset("t", "ml"))
    obj["spec"]["replicatedJobs"].append(copy.deepcopy(obj["spec"]["replicatedJobs"][0]))
    obj["spec"]["replicatedJobs"][1]["template"]["spec"]["template"]["spec"]["hostIPC"] = True
    paths = [p for p, _ in pod_specs(obj)]
    assert paths == [".spec.replicatedJobs[0].template.spec.template.spec",
                     ".spec.replicatedJobs[1].template.spec.template.spec"]
    assert object_violations(obj, "baseline") == [
        ".spec.replicatedJobs[1].template.spec.template.spec: host namespaces (hostIPC: true)"]


# --- through submit, against the test API server ---------------------------------------------

@pytest.fixture
def fleet(fresh_fleet):
    from tests.kubeapi.builders import gpu_node
    fresh_fleet["alpha"].seed([gpu_node("a0"), gpu_node("a1")])
    fresh_fleet["beta"].seed([gpu_node("b0")])
    return fresh_fleet


def privileged_jobset(name: str) -> str:
    obj = json.loads(jobset(name, "ml", replicas=1))
    pod = obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    pod["containers"][0]["securityContext"] = {"privileged": True}
    pod["volumes"] = [{"name": "root", "hostPath": {"path": "/"}}]
    return json.dumps(obj)


def test_submit_refuses_a_privileged_workload_and_creates_nothing(fleet, tmp_path):
    from placer.definitions.catalog import load_catalog
    env = Env(fleet, load_catalog())
    result = env.submit([write(tmp_path, "p.yaml", privileged_jobset("escape"))])
    assert result.exit_code == 1 and result.created == ()
    (failed,) = result.failed
    assert "pod security level 'baseline' of the cluster forbids" in failed.error
    assert "containers[train]: privileged" in failed.error and "hostPath volume 'root'" in failed.error
    for name in ("alpha", "beta"):
        assert env.writes(name) == 0 and fleet[name].objects(JOBSET, "JobSet") == []


def test_a_cluster_that_allows_privileged_gets_it_and_namespaces_carry_the_level(fleet, tmp_path):
    from placer.definitions.catalog import load_catalog
    entries = [{**ENTRIES[0], "podSecurity": "privileged"}, {**ENTRIES[1], "podSecurity": "restricted"}]
    env = Env(fleet, load_catalog(), entries=entries)
    result = env.submit([write(tmp_path, "p.yaml", privileged_jobset("allowed"))])
    assert [c.cluster for c in result.created] == ["alpha"]
    assert fleet["alpha"].get("v1", "Namespace", "ml")["metadata"]["labels"][LABEL] == "privileged"


def test_namespaces_placer_creates_enforce_baseline_by_default(fleet, tmp_path):
    from placer.definitions.catalog import load_catalog
    env = Env(fleet, load_catalog())
    result = env.submit([write(tmp_path, "j.yaml", jobset("plain", "team-a", replicas=1))])
    (created,) = result.created
    labels = fleet[created.cluster].get("v1", "Namespace", "team-a")["metadata"]["labels"]
    assert labels[LABEL] == "baseline" and labels[A.MANAGED] == "true"

