"""Helpers of the tests on real operators (tests/real/test_operators_*.py): placer's CLI against the
operators' clusters, and the check that the pods an operator created are placer's prediction."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import yaml
from typer.testing import CliRunner

from placer.cli import app
from placer.model.quantity import parse_quantity

NAMES = ("east", "west")
OPERATORS = "all"      # every operator hack/kube-env runs has its test_operators_*.py
COMPLETE = "pod-complete.stage.kwok.x-k8s.io/delay"


def placer(kubeconfig: Path, tmp_path: Path, *args: str):
    clusters = tmp_path / "clusters.yaml"
    clusters.write_text(yaml.safe_dump({"clusters": [{"name": n, "context": n} for n in NAMES]}))
    return CliRunner().invoke(app, [*args, "--kubeconfig", str(kubeconfig), "--clusters", str(clusters)])


def submit(kubeconfig: Path, tmp_path: Path, obj: dict) -> dict:
    path = tmp_path / f"{obj['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(obj))
    r = placer(kubeconfig, tmp_path, "submit", "-f", str(path), "-o", "json", "--time-limit", "5")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def phase(kubeconfig: Path, tmp_path: Path, name: str) -> str:
    r = placer(kubeconfig, tmp_path, "get", "-A", "-o", "json")
    assert r.exit_code == 0, r.output
    (item,) = [i for i in json.loads(r.stdout)["items"] if i["name"] == name]
    return item["phase"]


def describe(*args: str) -> dict:
    r = CliRunner().invoke(app, ["describe", *args, "-o", "json"])
    assert r.exit_code == 0, r.output
    (out,) = json.loads(r.stdout)
    return out


def describe_file(tmp_path: Path, obj: dict) -> dict:
    path = tmp_path / f"describe-{obj['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(obj))
    return describe("-f", str(path))


def pod_requests(pod: dict) -> dict:
    """What the scheduler counts for the pod (Kubernetes' rule, written out here): per resource the
    larger of the app containers' sum (plus sidecars: init containers that keep running) and each
    plain init container (plus the sidecars started before it), plus the pod overhead."""
    def requests(c: dict) -> dict:
        return {k: parse_quantity(v) for k, v in ((c.get("resources") or {}).get("requests") or {}).items()}

    def add(a: dict, b: dict) -> dict:
        return {k: a.get(k, 0) + b.get(k, 0) for k in a.keys() | b.keys()}

    sidecars: dict = {}
    peak: dict = {}
    for c in pod["spec"].get("initContainers") or ():
        if c.get("restartPolicy") == "Always":
            sidecars = add(sidecars, requests(c))
            r = sidecars
        else:
            r = add(sidecars, requests(c))
        peak = {k: max(peak.get(k, 0), r.get(k, 0)) for k in peak.keys() | r.keys()}
    out = sidecars
    for c in pod["spec"]["containers"]:
        out = add(out, requests(c))
    out = {k: max(out.get(k, 0), peak.get(k, 0)) for k in out.keys() | peak.keys()}
    return add(out, {k: parse_quantity(v) for k, v in (pod["spec"].get("overhead") or {}).items()})


def matches_describe(predicted: dict, pods_of: Callable[[str], list[dict]]) -> None:
    """The operator's pods are placer's prediction: per component instance, as many pods as
    predicted under its selector, each requesting what placer counted per pod."""
    for comp in predicted["components"]:
        pods = pods_of(comp["selector"])
        assert len(pods) == comp["pods"], (comp["instance"], len(pods))
        want = {k: parse_quantity(v) for k, v in comp["podResources"].items()}
        for p in pods:
            assert pod_requests(p) == want, (comp["instance"], p["metadata"]["name"], pod_requests(p), want)
    assert sum(len(pods_of(c["selector"])) for c in predicted["components"]) == predicted["pods"]
