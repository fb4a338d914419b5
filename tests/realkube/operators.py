"""Helpers of the tests on real operators (tests/real/test_operators_*.py): placer's CLI against the
operators' clusters, and the check that the pods an operator created are placer's prediction."""
from __future__ import annotations

import json
from fractions import Fraction
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


def placer_cli(kubeconfig: Path, tmp_path: Path, *args: str, ok: tuple[int, ...] = (0,)):
    """placer's CLI in process, its JSON output parsed; submit, get and plan read east and west."""
    if args[0] in ("submit", "get", "plan"):
        r = placer(kubeconfig, tmp_path, *args)
    else:
        r = CliRunner().invoke(app, list(args))
    assert r.exit_code in ok, (args, r.exit_code, r.output)
    return json.loads(r.stdout)


def describe(*args: str) -> dict:
    r = CliRunner().invoke(app, ["describe", *args, "-o", "json"])
    assert r.exit_code == 0, r.output
    (out,) = json.loads(r.stdout)
    return out


def describe_file(tmp_path: Path, obj: dict) -> dict:
    path = tmp_path / f"describe-{obj['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(obj))
    return describe("-f", str(path))


def effective_requests(pod: dict) -> dict[str, Fraction]:
    """A live pod's requests as the scheduler counts them (Kubernetes' PodRequests, written from its
    rules, not placer's): the containers plus the restartable init containers (sidecars), or an
    init container's own plus the sidecars started before it when larger, plus the overhead.
    Resources asked as 0 are left out."""
    def requests(c: dict) -> dict[str, Fraction]:
        return {k: parse_quantity(v) for k, v in ((c.get("resources") or {}).get("requests") or {}).items()}

    def add(a: dict, b: dict) -> dict:
        return {k: a.get(k, 0) + b.get(k, 0) for k in {*a, *b}}

    total: dict = {}
    for c in pod["spec"]["containers"]:
        total = add(total, requests(c))
    sidecars: dict = {}
    init_peak: dict = {}
    for c in pod["spec"].get("initContainers") or ():
        own = requests(c)
        if c.get("restartPolicy") == "Always":
            total, sidecars = add(total, own), add(sidecars, own)
            own = sidecars
        else:
            own = add(own, sidecars)
        init_peak = {k: max(init_peak.get(k, 0), own.get(k, 0)) for k in {*init_peak, *own}}
    total = {k: max(total.get(k, 0), init_peak.get(k, 0)) for k in {*total, *init_peak}}
    total = add(total, {k: parse_quantity(v) for k, v in (pod["spec"].get("overhead") or {}).items()})
    return {k: v for k, v in total.items() if v}


def predicted_requests(component: dict) -> dict[str, Fraction]:
    """`placer describe -o json` podResources of a component, exact."""
    return {k: Fraction(str(v)) for k, v in component["podResources"].items() if v}


def matches_describe(predicted: dict, pods_of: Callable[[str], list[dict]]) -> None:
    """The operator's pods are placer's prediction: per component instance, as many pods as
    predicted under its selector, each requesting what placer counted per pod."""
    for comp in predicted["components"]:
        pods = pods_of(comp["selector"])
        assert len(pods) == comp["pods"], (comp["instance"], len(pods))
        want = predicted_requests(comp)
        for p in pods:
            assert effective_requests(p) == want, (comp["instance"], p["metadata"]["name"], effective_requests(p))
    assert sum(len(pods_of(c["selector"])) for c in predicted["components"]) == predicted["pods"]


def kubeflow_job_completes(ops, tmp_path: Path, ns: str, kind: str, name: str) -> None:
    """KWOK runs a Kubeflow job's pods, then completes them: placer's phase (`get`, live
    `describe`) follows the operator's real status to Running, then Completed, and the
    operator's own last true condition is Succeeded. `kind` as kubectl names it (`mpijob`)."""
    from tests.kubeenv import wait_for

    wait_for(lambda: phase(ops.kubeconfig, tmp_path, name) in ("Running", "Completed") or None, 120,
             "placer says Running")
    wait_for(lambda: phase(ops.kubeconfig, tmp_path, name) == "Completed" or None, 120, "placer says Completed")
    live = describe(f"{kind}/{name}", "-n", ns, "--context", "east", "--kubeconfig", str(ops.kubeconfig))
    assert live["phase"] == "Completed"
    status = ops.client("east").get(f"{kind}s", name, ns)["status"]
    assert [c["type"] for c in status["conditions"] if c["status"] == "True"][-1] == "Succeeded", json.dumps(status)
