"""FleetQuota on a real hub (issue 23 item 1): the CRD installs with the real kubectl, the real
API server refuses a FleetQuota with a bad field (its OpenAPI schema and CEL rules), a good one
bounds what the daemon places on real east and west, and a `kubectl apply` raising it places
the rest without a restart. Judged from the real API servers: the copies on the targets, the
staging objects' annotations and the FleetQuota's status."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from placer import daemon as D
from placer.daemon import Daemon, DaemonConfig, FakeClock, LeaseTiming
from placer.definitions.catalog import load_catalog
from placer.inputs.clusters_file import ClusterEntry
from placer.kube import Kube, RetryPolicy
from placer.model.errors import NotFound
from tests.daemon.daemon_helpers import STAGING, jobset
from tests.kubeenv import module_crds, wait_for

pytestmark = pytest.mark.kube

CLUSTERS = ("east", "west")
JOBSET = ("jobset.x-k8s.io/v1alpha2", "JobSet")
CRD = Path(__file__).parents[2] / "catalog" / "crd" / "fleetquotas.placer.dev.yaml"


def fleetquota(name: str, spec: dict) -> str:
    return yaml.safe_dump({"apiVersion": "placer.dev/v1alpha1", "kind": "FleetQuota", "metadata": {"name": name},
                           "spec": spec})


GOOD = {"members": {"selector": "team=a"}, "nominal": {"nvidia.com/gpu": 8}}
BAD = {   # each refused by the real API server, naming the field
    "lots of GPUs": ({"members": {"selector": "team=a"}, "nominal": {"nvidia.com/gpu": "lots"}}, "nominal"),
    "no nominal": ({"members": {"selector": "team=a"}}, "nominal"),
    "both members": ({"members": {"selector": "team=a", "namespaces": ["x"]}, "nominal": {"cpu": 1}},
                     "exactly one of namespaces or selector"),
    "limit without cohort": ({"members": {"selector": "team=a"}, "nominal": {"cpu": 1},
                              "borrowingLimit": {"cpu": 1}}, "borrowingLimit"),
    "no members": ({"nominal": {"cpu": 1}}, "members"),
    "unknown field": ({"members": {"selector": "team=a"}, "nominal": {"cpu": 1}, "nominals": {"cpu": 1}},
                      "nominals"),
    "negative": ({"members": {"selector": "team=a"}, "nominal": {"nvidia.com/gpu": -1}}, "nominal"),
}


def team_job(name: str) -> dict:
    obj = jobset(name, pods=1, gpus=4)
    obj["metadata"]["labels"] = {"team": "a"}
    return obj


def test_fleetquota_crd_refuses_bad_objects_and_bounds_the_daemon_live(real):
    for c in ("hub", *CLUSTERS):
        real.install_crds(c, module_crds("jobset"))
    real.kubectl("--context", "hub", "apply", "-f", str(CRD))
    real.kubectl("--context", "hub", "wait", "--for=condition=Established", "crd/fleetquotas.placer.dev",
                 "--timeout=60s")
    real.nodes("east", count=1, prefix="e", gpus=8)
    real.nodes("west", count=1, prefix="w", gpus=8)
    real.namespace("hub", STAGING)
    real.purge("hub", JOBSET, STAGING)           # an earlier test's staged work would be placed too
    hub = real.client("hub")
    res = hub.resource_for(*JOBSET)
    for what, (spec, field) in BAD.items():
        proc = real.kubectl("--context", "hub", "apply", "--validate=strict", "-f", "-",
                            input=fleetquota("bad", spec), check=False)
        assert proc.returncode != 0, f"{what}: accepted"
        assert field in proc.stderr, f"{what}: {proc.stderr}"
    assert real.kubectl("--context", "hub", "get", "fleetquotas", "-o", "name").stdout.strip() == ""
    real.kubectl("--context", "hub", "apply", "-f", "-", input=fleetquota("team-a", GOOD))
    names = [f"qa-{i}" for i in range(3)]
    daemon = None
    try:
        config = DaemonConfig(staging_namespace=STAGING, clusters=tuple(ClusterEntry(name=c, context=c)
                                                                         for c in CLUSTERS),
                              hub_context="hub", batch_window=0.05, time_limit=1.0, watch_retry=0.2,
                              lease=LeaseTiming(duration=4.0, renew_deadline=3.0, retry_period=0.3))
        kube = Kube(str(real.kubeconfig), retry=RetryPolicy(attempts=3, base=0.05, cap=0.5), timeout=10)
        daemon = Daemon(config, kube, load_catalog(), clock=FakeClock()).start()
        for n in names:
            hub.create(res, team_job(n), STAGING)

        def ann(n: str) -> dict:
            return (hub.get(res, n, STAGING)["metadata"].get("annotations") or {})

        def copies() -> dict[str, list[str]]:
            out: dict[str, list[str]] = {}
            for c in CLUSTERS:
                client = real.client(c)
                for o in client.list(client.resource_for(*JOBSET), STAGING).items:
                    out.setdefault(o["metadata"]["name"], []).append(c)
            return out

        wait_for(lambda: sum(bool(ann(n).get(D.PLACED_CLUSTER)) for n in names) == 2 and
                 sum(ann(n).get(D.ANN_MESSAGE, "").startswith("unplaced") for n in names) == 1, 90,
                 "two placed within team-a's 8 GPUs, the third unplaced")
        waiting = next(n for n in names if not ann(n).get(D.PLACED_CLUSTER))
        assert "over quota: team-a uses 8 of 8 GPUs" in ann(waiting)[D.ANN_MESSAGE]
        assert sorted(copies()) == sorted(n for n in names if n != waiting)
        wait_for(lambda: (hub.get("fleetquotas", "team-a").get("status") or {}).get("used") ==
                 {"nvidia.com/gpu": "8"}, 60, "team-a's status written")
        got = real.kubectl("--context", "hub", "get", "fleetquota", "team-a").stdout
        header, row = got.splitlines()[:2]                  # the printer columns
        assert header.split()[:6] == ["NAME", "COHORT", "NOMINAL", "GPUS", "USED", "GPUS"], header
        assert row.split()[:5] == ["team-a", "8", "8", "4", "True"], row     # no cohort: blank
        # the raise, as an administrator makes it
        real.kubectl("--context", "hub", "apply", "-f", "-",
                     input=fleetquota("team-a", {**GOOD, "nominal": {"nvidia.com/gpu": 12}}))
        wait_for(lambda: ann(waiting).get(D.PLACED_CLUSTER), 90, "the third placed after the raise")
        wait_for(lambda: sorted(copies()) == sorted(names), 60, "its copy created")
        assert all(len(cs) == 1 for cs in copies().values())
    finally:
        if daemon is not None:
            daemon.stop()
        real.kubectl("--context", "hub", "delete", "fleetquotas", "--all", check=False)
        for n in names:
            try:
                hub.patch(res, n, {"metadata": {"finalizers": None}}, STAGING)
                hub.delete(res, n, STAGING, missing_ok=True)
            except NotFound:
                pass
