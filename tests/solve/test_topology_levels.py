"""Topology levels in: the clusters file's `topology:` (validated), node labels generated
for simulated node groups, and Kueue Topology objects read from a cluster's API server."""
from __future__ import annotations

from dataclasses import dataclass, field

import pytest
import yaml
from typer.testing import CliRunner

from placer import actuate as A
from placer.cli import app
from placer.definitions.catalog import load_catalog
from placer.fleetview.inventory import live_clusters, topology_levels
from placer.inputs.clusters_file import as_entry, expand_label, parse_clusters, simulated_cluster
from placer.kube import Kube, RetryPolicy
from placer.model.errors import InputError
from tests.kubeapi import gpu_node
from tests.kubeapi.builders import crd

RACK, CLIQUE, BLOCK = "example.com/rack", "nvidia.com/gpu.clique", "example.com/block"
runner = CliRunner()


def entry(**extra) -> dict:
    return {"name": "gb", "nodes": [{"namePrefix": "gb-", "count": 72, "allocatable": {"nvidia.com/gpu": 4},
                                     "labels": {RACK: "rack-{index // 18}", BLOCK: "b{index // 36}",
                                                CLIQUE: "clique-{index // 18}.{index % 18 // 9}"}}], **extra}


def test_levels_and_generated_node_labels():
    cl = simulated_cluster(as_entry(entry(topology=[BLOCK, RACK, CLIQUE])))
    assert cl.topology == (BLOCK, RACK, CLIQUE)
    racks = [n.labels[RACK] for n in cl.nodes]
    assert racks == [f"rack-{i // 18}" for i in range(72)]
    assert cl.nodes[27].labels == {RACK: "rack-1", BLOCK: "b0", CLIQUE: "clique-1.1"}
    assert cl.nodes[71].labels[BLOCK] == "b1"
    assert expand_label("x{index}-{ index % 4 }-{index//2%3}", 13) == "x13-1-0"


def test_a_cluster_without_levels_has_none_and_plain_labels_are_kept():
    e = entry()
    e["nodes"][0]["labels"] = {"nvidia.com/gpu.product": "NVIDIA-GB200"}
    cl = simulated_cluster(as_entry(e))
    assert cl.topology == () and cl.nodes[5].labels == {"nvidia.com/gpu.product": "NVIDIA-GB200"}


@pytest.mark.parametrize("change,words", [
    ({"topology": [RACK, "Bad Key"]}, "clusters[0].topology: [1]: 'Bad Key' is not a label key"),
    ({"topology": [RACK, RACK]}, "clusters[0].topology: [1]: 'example.com/rack' is given twice"),
    ({"topology": ["a/b/c"]}, "at most one '/'"),
    ({"topology": [""]}, "expected a label key"),
    ({"topology": RACK}, "clusters[0].topology"),
    ({"topologyHandoff": "volcano"}, "clusters[0].topologyHandoff"),
    ({"labels_pattern": "rack-{idx}"}, "labels: example.com/rack: 'rack-{idx}': a pattern is {index}"),
    ({"labels_pattern": "rack-{index % 0}"}, "division or remainder by 0"),
    ({"labels_pattern": "rack {index}"}, "'rack {index}' makes 'rack 0' is not a label value"),
])
def test_bad_topology_settings_name_the_field(tmp_path, change, words):
    e = entry()
    pattern = change.pop("labels_pattern", None)
    if pattern:
        e["nodes"][0]["labels"][RACK] = pattern
    e.update(change)
    with pytest.raises(InputError) as err:
        parse_clusters({"clusters": [e]}, "c.yaml")
    assert words in str(err.value)
    f = tmp_path / "c.yaml"
    f.write_text(yaml.safe_dump({"clusters": [e]}))
    r = runner.invoke(app, ["clusters", "--clusters", str(f)])
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1 and words in r.stderr


def test_topology_handoff_setting():
    assert as_entry(entry(topologyHandoff="kueue")).topologyHandoff == "kueue"
    assert as_entry(entry()).topologyHandoff is None


def test_levels_of_several_kueue_topologies_merge_longest_first():
    objs = [{"spec": {"levels": [{"nodeLabel": RACK}]}},
            {"spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}, {"nodeLabel": "kubernetes.io/hostname"}]}},
            {"spec": {}}]
    assert topology_levels(objs) == (BLOCK, RACK, "kubernetes.io/hostname")


# --- live: Kueue Topology objects on the in-repo API server ------------------------------

@dataclass
class Entry:
    name: str
    context: str | None
    labels: dict = field(default_factory=dict)
    topology: list[str] | None = None


def kueue_topology(name: str, *keys: str, version: str = "v1beta1") -> dict:
    return {"apiVersion": f"kueue.x-k8s.io/{version}", "kind": "Topology", "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": k} for k in keys]}}


@pytest.fixture
def kueue_fleet(make_fleet):
    fleet = make_fleet(names=("alpha", "beta", "gamma"), crds=False)
    fleet["alpha"].install_crds([crd("kueue.x-k8s.io", "Topology", "topologies", versions=("v1beta1",),
                                     scope="Cluster")])
    fleet["gamma"].install_crds([crd("kueue.x-k8s.io", "Topology", "topologies", versions=("v1alpha1",),
                                     scope="Cluster")])
    fleet["alpha"].seed([gpu_node("a1", labels={BLOCK: "b0", RACK: "r0"}), kueue_topology("default", BLOCK, RACK)])
    fleet["beta"].seed([gpu_node("b1")])
    fleet["gamma"].seed([gpu_node("c1"), kueue_topology("gb", CLIQUE, version="v1alpha1")])
    return fleet


def _kube(fleet) -> Kube:
    return Kube(str(fleet.kubeconfig), sleep=lambda s: None, retry=RetryPolicy(attempts=2, base=0.01))


def test_kueue_topology_objects_are_the_levels_when_the_file_gives_none(kueue_fleet):
    got = live_clusters([Entry("alpha", "alpha"), Entry("beta", "beta"), Entry("gamma", "gamma")],
                        kube=_kube(kueue_fleet))
    assert got["alpha"].error is None and got["alpha"].topology == (BLOCK, RACK)
    assert got["beta"].error is None and got["beta"].topology == ()        # no Kueue there
    assert got["gamma"].topology == (CLIQUE,)                              # the older API version


def test_the_clusters_file_levels_win_over_kueue(kueue_fleet):
    got = live_clusters([Entry("alpha", "alpha", topology=[CLIQUE])], kube=_kube(kueue_fleet))
    assert got["alpha"].topology == (CLIQUE,)


def test_read_live_carries_the_levels_too(kueue_fleet):
    state = A.read_live(_kube(kueue_fleet), [as_entry({"name": "alpha", "context": "alpha"}),
                                             as_entry({"name": "beta", "context": "beta", "topology": [RACK]})],
                        load_catalog())
    assert state.clusters["alpha"].topology == (BLOCK, RACK)
    assert state.clusters["beta"].topology == (RACK,)


def test_a_forbidden_topology_list_leaves_the_cluster_readable(kueue_fleet):
    kueue_fleet["alpha"].faults.fail(403, match="/topologies")
    got = live_clusters([Entry("alpha", "alpha")], kube=_kube(kueue_fleet))
    assert got["alpha"].error is None and got["alpha"].topology == () and got["alpha"].nodes


def test_placer_clusters_shows_the_levels(tmp_path):
    import json
    f = tmp_path / "c.yaml"
    f.write_text(yaml.safe_dump({"clusters": [entry(topology=[BLOCK, RACK]), {**entry(), "name": "flat"}]}))
    r = runner.invoke(app, ["clusters", "--clusters", str(f), "-o", "json"])
    assert r.exit_code == 0, r.output
    got = {c["name"]: c.get("topology") for c in json.loads(r.stdout)["clusters"]}
    assert got == {"gb": [BLOCK, RACK], "flat": None}
    r = runner.invoke(app, ["clusters", "--clusters", str(f), "-o", "wide"], env={"COLUMNS": "300"})
    assert "TOPOLOGY" in r.stdout and f"{BLOCK},{RACK}" in r.stdout
