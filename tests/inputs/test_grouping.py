"""Placement groups from what ties workloads together (issue 12, defect 6): the
annotation, and companions they share; an unrelated Job in a JobSet's file is its own
group with its own reasons."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from placer.cli import app
from placer.definitions.catalog import load_catalog
from placer.inputs.manifests import load_groups

runner = CliRunner()


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def job(name, gpus=1, ns="ml", pod=None, labels=None, annotations=None):
    meta = {"name": name, "namespace": ns, **({"annotations": annotations} if annotations else {})}
    spec = {"restartPolicy": "Never",
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "m", "image": "i", "resources": {"limits": {"nvidia.com/gpu": gpus}}}],
            **(pod or {})}
    tmpl = {"spec": spec, **({"metadata": {"labels": labels}} if labels else {})}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": {"template": tmpl}}


def jobset(name, gpus_per_pod=8, replicas=8, ns="ml"):
    return {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": name, "namespace": ns},
            "spec": {"replicatedJobs": [{"name": "w", "replicas": replicas, "template": {"spec": {
                "parallelism": 1, "completions": 1, "template": {"spec": {
                    "restartPolicy": "Never",
                    "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                    "containers": [{"name": "m", "image": "i",
                                    "resources": {"limits": {"nvidia.com/gpu": gpus_per_pod}}}]}}}}}]}}


def obj(kind, name, ns="ml", api="v1", **fields):
    return {"apiVersion": api, "kind": kind, "metadata": {"name": name, "namespace": ns}, **fields}


def write(tmp_path: Path, name: str, *docs) -> str:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(list(docs)))
    return str(path)


def groups_of(paths, catalog):
    return {tuple(sorted(w.name for w in g.workloads)): g for g in load_groups(paths, catalog)}


@pytest.mark.parametrize("ref,companion", [
    ({"volumes": [{"name": "v", "configMap": {"name": "shared"}}]}, obj("ConfigMap", "shared")),
    ({"volumes": [{"name": "v", "projected": {"sources": [{"configMap": {"name": "shared"}}]}}]},
     obj("ConfigMap", "shared")),
    ({"containers": [{"name": "m", "image": "i", "env": [{"name": "T", "valueFrom": {
        "secretKeyRef": {"name": "shared", "key": "t"}}}]}]}, obj("Secret", "shared")),
    ({"containers": [{"name": "m", "image": "i", "envFrom": [{"secretRef": {"name": "shared"}}]}]},
     obj("Secret", "shared")),
    ({"volumes": [{"name": "v", "secret": {"secretName": "shared"}}]}, obj("Secret", "shared")),
    ({"volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "shared"}}]},
     obj("PersistentVolumeClaim", "shared")),
    ({"serviceAccountName": "shared"}, obj("ServiceAccount", "shared")),
])
def test_workloads_sharing_a_companion_form_one_group(tmp_path, catalog, ref, companion):
    both = write(tmp_path, "both.yaml", job("a", pod=ref), job("b", pod=ref), job("loner"), companion)
    groups = groups_of([both], catalog)
    assert set(groups) == {("a", "b"), ("loner",)}
    assert [c["metadata"]["name"] for c in groups[("a", "b")].companions] == ["shared"]
    assert groups[("loner",)].companions == ()          # referenced: it does not follow the others


def test_a_service_selecting_pods_ties_their_workloads(tmp_path, catalog):
    svc = obj("Service", "front", spec={"selector": {"app": "llm"}, "ports": [{"port": 80}]})
    path = write(tmp_path, "svc.yaml", job("a", labels={"app": "llm"}), job("b", labels={"app": "llm"}),
                 job("c", labels={"app": "other"}), svc)
    groups = groups_of([path], catalog)
    assert set(groups) == {("a", "b"), ("c",)}
    assert [c["kind"] for c in groups[("a", "b")].companions] == ["Service"]


def test_companions_tie_through_each_other_and_across_files(tmp_path, catalog):
    sa = obj("ServiceAccount", "runner")
    rb = obj("RoleBinding", "runner-rb", api="rbac.authorization.k8s.io/v1",
             subjects=[{"kind": "ServiceAccount", "name": "runner"}],
             roleRef={"kind": "Role", "name": "reader", "apiGroup": "rbac.authorization.k8s.io"})
    role = obj("Role", "reader", api="rbac.authorization.k8s.io/v1", rules=[])
    one = write(tmp_path, "one.yaml", job("a", pod={"serviceAccountName": "runner"}), sa, rb, role)
    two = write(tmp_path, "two.yaml", job("b", pod={"serviceAccountName": "runner"}))
    [g] = load_groups([one, two], catalog)
    assert sorted(w.name for w in g.workloads) == ["a", "b"]
    assert sorted(c["kind"] for c in g.companions) == ["Role", "RoleBinding", "ServiceAccount"]


def test_companions_in_another_namespace_do_not_tie(tmp_path, catalog):
    ref = {"volumes": [{"name": "v", "configMap": {"name": "cfg"}}]}
    path = write(tmp_path, "ns.yaml", job("a", pod=ref, ns="x"), job("b", pod=ref, ns="y"), obj("ConfigMap", "cfg", ns="x"))
    groups = groups_of([path], catalog)
    assert set(groups) == {("a",), ("b",)}
    assert [c["metadata"]["namespace"] for c in groups[("a",)].companions] == ["x"]
    assert groups[("b",)].companions == ()


def test_an_unrelated_job_next_to_a_jobset_is_its_own_group_with_its_own_reasons(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PLACER_CLUSTERS", raising=False)
    path = write(tmp_path, "mixed.yaml", jobset("giant", replicas=64), job("side", gpus=1))
    r = runner.invoke(app, ["plan", "-f", path, "-o", "json"])
    assert r.exit_code == 3, r.output
    doc = json.loads(r.stdout)
    assert [p["workload"] for p in doc["placements"]] == ["ml/side"]
    assert doc["placements"][0]["group"] == f"{path}#ml/side"
    [u] = doc["unplaced"]
    assert u["workload"] == "ml/giant" and u["group"] == f"{path}#ml/giant"
    # before: one all-or-nothing group, and the small Job was unplaced with the JobSet's reasons
    table = runner.invoke(app, ["plan", "-f", path, "-o", "wide"]).stdout
    assert f"{path}#ml/side" in table


def test_notes_for_unreferenced_companions_reach_the_user(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PLACER_CLUSTERS", raising=False)
    path = write(tmp_path, "two.yaml", job("a"), job("b"), obj("ConfigMap", "settings"))
    r = runner.invoke(app, ["plan", "-f", path, "-o", "json"])
    assert r.exit_code == 0, r.output
    assert "ConfigMap settings" in r.stderr and "referenced by no workload" in r.stderr
    assert len({p["group"] for p in json.loads(r.stdout)["placements"]}) == 2


def test_a_shared_companion_is_applied_by_each_group_on_one_cluster(fresh_fleet, tmp_path, catalog):
    """Two groups bringing the same unreferenced ConfigMap to one cluster: both are created,
    the second does not refuse the ConfigMap as someone else's."""
    from placer.kube import Kube
    from placer.ops.context import context_of
    from placer.ops.submit import SubmitRequest, submit
    from tests.kubeapi.builders import gpu_node

    fresh_fleet["alpha"].seed([gpu_node("a0")])
    path = write(tmp_path, "two.yaml", job("a", ns="shared-cm"), job("b", ns="shared-cm"),
                 obj("ConfigMap", "settings", ns="shared-cm", data={"k": "v"}))
    kube = Kube(str(fresh_fleet.kubeconfig))
    result = submit(context_of([{"name": "alpha", "context": "alpha"}], catalog, kube), SubmitRequest((path,)))
    assert result.failed == () and len(result.created) == 2, result
    client = kube.client("alpha")
    assert client.get("configmaps", "settings", "shared-cm")["data"] == {"k": "v"}
    assert {client.get("jobs", n, "shared-cm")["metadata"]["name"] for n in ("a", "b")} == {"a", "b"}


def test_a_malformed_selector_ties_nothing(tmp_path, catalog):
    svc = obj("Service", "odd", spec={"selector": {"app": ["llm"]}})
    path = write(tmp_path, "odd.yaml", job("a", labels={"app": "llm"}), job("b", labels={"app": "llm"}), svc)
    assert set(groups_of([path], catalog)) == {("a",), ("b",)}


def test_grouping_scales_with_labels_not_services_times_workloads(tmp_path, catalog):
    """2,000 Jobs, 200 Services and 200 ConfigMaps: 200 groups of 10, each with its two companions."""
    docs = []
    for i in range(2000):
        docs.append(job(f"j{i}", labels={"app": f"a{i % 200}"},
                        pod={"volumes": [{"name": "v", "configMap": {"name": f"cm{i % 200}"}}]}))
    for k in range(200):
        docs += [obj("ConfigMap", f"cm{k}"), obj("Service", f"s{k}", spec={"selector": {"app": f"a{k}"}})]
    groups = load_groups([write(tmp_path, "many.yaml", *docs)], catalog)
    assert len(groups) == 200 and all(len(g.workloads) == 10 and len(g.companions) == 2 for g in groups)


def test_specs_are_walked_for_names_only_when_a_companion_could_be_named(tmp_path, catalog, monkeypatch):
    """With Services alone no workload names a companion: no spec is walked (counted), and
    the groups are those the walk finds; one ConfigMap given, every spec is walked."""
    from placer.inputs import grouping

    walked = []
    full = grouping.workload_refs
    monkeypatch.setattr(grouping, "workload_refs", lambda o: walked.append(o) or full(o))
    pod = {"volumes": [{"name": "v", "configMap": {"name": "cm"}}]}
    svc = obj("Service", "front", spec={"selector": {"app": "llm"}})
    docs = [job("a", labels={"app": "llm"}, pod=pod), job("b", pod=pod), job("c", labels={"app": "llm"}), svc]
    assert set(groups_of([write(tmp_path, "s.yaml", *docs)], catalog)) == {("a", "c"), ("b",)}
    assert walked == []
    assert set(groups_of([write(tmp_path, "c.yaml", *docs, obj("ConfigMap", "cm"))], catalog)) == {("a", "b", "c")}
    assert len(walked) == 3


def _refs_by_recursion(node, out):
    """The judge: every (kind, name) a spec names, found by plain recursion."""
    named = {"configMap": ("ConfigMap", "name"), "configMapRef": ("ConfigMap", "name"),
             "configMapKeyRef": ("ConfigMap", "name"), "secretRef": ("Secret", "name"),
             "secretKeyRef": ("Secret", "name"), "persistentVolumeClaim": ("PersistentVolumeClaim", "claimName")}
    if isinstance(node, list):
        for item in node:
            _refs_by_recursion(item, out)
    elif isinstance(node, dict):
        for key, value in node.items():
            if key in named and isinstance(value, dict) and isinstance(value.get(named[key][1]), str):
                out.add((named[key][0], value[named[key][1]]))
            elif key == "secret" and isinstance(value, dict):
                name = value.get("secretName") or value.get("name")
                if isinstance(name, str):
                    out.add(("Secret", name))
            elif key in ("serviceAccountName", "serviceAccount") and isinstance(value, str) and value:
                out.add(("ServiceAccount", value))
            elif key == "imagePullSecrets" and isinstance(value, list):
                out |= {("Secret", s["name"]) for s in value if isinstance(s, dict) and isinstance(s.get("name"), str)}
            _refs_by_recursion(value, out)
    return out


def test_references_are_found_at_any_depth_as_plain_recursion_finds_them():
    """On every document of examples/, tests/fixtures and the shared corpus, and on one
    naming each kind of reference at several depths."""
    from placer.inputs.grouping import REF_KINDS, workload_refs

    root = Path(__file__).resolve().parents[2]
    dirs = [root / "examples", root / "tests" / "fixtures", root.parent / "shared" / "corpus"]
    docs = [d for base in dirs if base.is_dir() for f in sorted(base.rglob("*.y*ml"))
            if f.stat().st_size < 100_000                   # not the CRDs' schemas: no pod spec in them
            for d in yaml.load_all(f.read_text(encoding="utf-8-sig"), Loader=yaml.CSafeLoader) if isinstance(d, dict)]
    deep = {"spec": {"a": [{"configMap": {"name": "c"}, "secretRef": {"name": 1}},
                           {"volumes": [{"secret": {"secretName": "s"}}, {"projected": {"secret": {"name": "p"}}}]},
                           [[{"persistentVolumeClaim": {"claimName": "v", "configMapKeyRef": {"name": "k"}}}]]],
                     "serviceAccountName": "sa", "serviceAccount": "", "imagePullSecrets": [{"name": "r"}, "x"]}}
    docs.append(deep)
    assert len(docs) >= 50
    assert workload_refs(deep) == {("ConfigMap", "c"), ("Secret", "s"), ("Secret", "p"), ("PersistentVolumeClaim", "v"),
                                   ("ConfigMap", "k"), ("ServiceAccount", "sa"), ("Secret", "r")}
    assert {kind for kind, _ in _refs_by_recursion(deep["spec"], set())} == REF_KINDS
    found = 0
    for d in docs:
        got = workload_refs(d)
        assert got == _refs_by_recursion(d.get("spec"), set())
        found += len(got)
    assert found >= 10
