"""Definitions registered in a cluster: `placer catalog apply`, then every cluster read uses them."""

from __future__ import annotations

import io
from contextlib import redirect_stderr

import pytest
import yaml
from typer.testing import CliRunner

from placer.cli import app
from placer.definitions.catalog import load_catalog
from placer.fleetview.registry import (
    API_VERSION,
    CRD_NAME,
    KIND,
    builtin_definition_files,
    cluster_definitions,
    ensure_crd,
    with_cluster_definitions,
)
from placer.kube import Kube
from placer.model.errors import UnknownKind
from placer.ops.describe import describe_live
from tests.kubeapi import bound_pod, crd, custom_object

WIDGET_DEF = {
    "name": "widget", "description": "a type placer did not ship with",
    "matches": [{"apiVersion": "example.com/v1", "kind": "Widget"}],
    "components": [{"name": "worker", "pod": {"template": ".spec.template"}, "replicas": ".spec.replicas // 1",
                    "podSelector": '{"example.com/widget": $root.metadata.name}'}],
}


def apply_cli(fleet, *files, context="alpha"):
    return CliRunner().invoke(app, ["catalog", "apply", "--context", context, "--kubeconfig",
                                    str(fleet.kubeconfig), *map(str, files)])


def registered(cluster) -> dict[str, dict]:
    return {o["metadata"]["name"]: o for o in cluster.objects(API_VERSION, KIND)}


def test_apply_builtin_catalog_installs_the_crd(fresh_fleet):
    alpha = fresh_fleet["alpha"]
    res = apply_cli(fresh_fleet)
    assert res.exit_code == 0, res.output
    assert alpha.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", CRD_NAME)["spec"]["group"] == "placer.dev"
    names = {yaml.safe_load(p.read_text())["name"] for p in builtin_definition_files()}
    objs = registered(alpha)
    assert set(objs) == names and "jobset" in objs
    assert objs["jobset"]["spec"]["matches"] == [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet"}]
    assert "workloaddefinition.placer.dev/jobset applied (jobset.x-k8s.io/v1alpha2/JobSet) on alpha" in res.stdout
    assert fresh_fleet["beta"].requests.count() == 0                     # only the context asked for
    # again: idempotent, the CRD is not re-created
    before = alpha.requests.count(resource="customresourcedefinitions", method="PATCH")
    assert apply_cli(fresh_fleet).exit_code == 0
    assert alpha.requests.count(resource="customresourcedefinitions", method="PATCH") == before


def test_ensure_crd_only_when_missing(fresh_fleet):
    client = Kube(str(fresh_fleet.kubeconfig)).client("beta")
    assert ensure_crd(client) is True
    assert ensure_crd(client) is False
    assert cluster_definitions(client, warn=lambda m: None) == []


def test_new_type_becomes_describable_with_one_apply(fresh_fleet, tmp_path):
    alpha = fresh_fleet["alpha"]
    alpha.install_crds([crd("example.com", "Widget", "widgets")])
    kube = Kube(str(fresh_fleet.kubeconfig))
    client = kube.client("alpha")
    client.create("widgets", custom_object("example.com/v1", "Widget", "w1", "ns", {
        "replicas": 3, "template": {"spec": {"containers": [
            {"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 2}}}]}}}))
    client.create("pods", bound_pod("w1-a", "n1", gpus=2, namespace="ns", labels={"example.com/widget": "w1"}))
    with pytest.raises(UnknownKind):
        describe_live("widget/w1", "ns", "alpha", None, load_catalog(), kube=kube)

    path = tmp_path / "widget.yaml"
    path.write_text(yaml.safe_dump(WIDGET_DEF))
    res = apply_cli(fresh_fleet, path)
    assert res.exit_code == 0, res.output
    w, pods = describe_live("widget/w1", "ns", "alpha", None, load_catalog(), kube=Kube(str(fresh_fleet.kubeconfig)))
    assert (w.definition, w.pods, w.gpus) == ("widget", 3, 6)
    assert w.source == "cluster alpha"
    assert [p.name for p in pods["worker/0"]] == ["w1-a"]


def test_cluster_definition_overrides_builtin_for_that_cluster_only(fresh_fleet, tmp_path):
    jobset = yaml.safe_load(next(p for p in builtin_definition_files() if p.name == "jobset.yaml").read_text())
    custom = {**jobset, "name": "jobset-site", "description": "site override: every role is one pod"}
    custom["components"] = [{**c, "replicas": "1", "podsPerReplica": "1"} for c in jobset["components"]]
    path = tmp_path / "jobset-site.yaml"
    path.write_text(yaml.safe_dump(custom))
    assert apply_cli(fresh_fleet, path).exit_code == 0

    obj = custom_object("jobset.x-k8s.io/v1alpha2", "JobSet", "js", "ns", {"replicatedJobs": [
        {"name": "w", "replicas": 4, "template": {"spec": {"parallelism": 2, "template": {"spec": {"containers": [
            {"name": "c", "image": "i", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}}}}]})
    kube = Kube(str(fresh_fleet.kubeconfig))
    for name in ("alpha", "beta"):
        kube.client(name).create("jobsets", obj)
    on_alpha, _ = describe_live("jobset/js", "ns", "alpha", None, load_catalog(), kube=kube)
    on_beta, _ = describe_live("jobset/js", "ns", "beta", None, load_catalog(), kube=kube)
    assert (on_alpha.definition, on_alpha.pods) == ("jobset-site", 1)
    assert (on_beta.definition, on_beta.pods) == ("jobset", 8)


def test_invalid_registered_definition_is_reported_and_skipped(fresh_fleet):
    kube = Kube(str(fresh_fleet.kubeconfig))
    client = kube.client("alpha")
    ensure_crd(client)
    bad = {**WIDGET_DEF, "name": "broken", "matches": [{"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet"}]}
    bad["components"] = [{**WIDGET_DEF["components"][0], "replicas": ".spec.replicas |||"}]
    client.create(KIND.lower() + "s", {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": "broken"},
                                       "spec": bad})
    warnings = []
    catalog = with_cluster_definitions(load_catalog(), client, warnings.append)
    assert catalog.lookup("jobset.x-k8s.io/v1alpha2", "JobSet").name == "jobset"     # built-in still serves
    assert len(warnings) == 1 and "workloaddefinition/broken" in warnings[0] and "replicas" in warnings[0]
    # through describe: one line on stderr, the command still works
    client.create("jobsets", custom_object("jobset.x-k8s.io/v1alpha2", "JobSet", "j", "ns",
                                           {"replicatedJobs": [{"name": "a", "template": {"spec": {"template": {
                                               "spec": {"containers": [{"name": "c", "image": "i"}]}}}}}]}))
    err = io.StringIO()
    with redirect_stderr(err):
        w, _ = describe_live("jobset/j", "ns", "alpha", None, load_catalog(), kube=kube)
    assert w.definition == "jobset" and "skipping invalid definition" in err.getvalue()


def test_invalid_file_is_refused_before_touching_the_cluster(fresh_fleet, tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({**WIDGET_DEF, "components": [{"name": "x"}]}))
    alpha = fresh_fleet["alpha"]
    alpha.requests.clear()
    res = apply_cli(fresh_fleet, path)
    assert res.exit_code == 2 and str(path) in res.stderr and "components" in res.stderr
    assert len(alpha.requests) == 0
