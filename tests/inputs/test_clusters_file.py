"""Clusters file: strict schema, errors naming the field, lookup order, simulated clusters."""

import pytest
import yaml

from placer.inputs.clusters_file import example_path, parse_clusters, simulated_cluster
from placer.inputs.targets import resolve_clusters
from placer.model.errors import InputError

GOOD = {
    "hub": {"context": "hub", "stagingNamespace": "placer-staging"},
    "clusters": [
        {"name": "east", "context": "kind-east", "labels": {"region": "us-east"}},
        {"name": "west", "labels": {"region": "us-west"}, "nodes": [
            {"namePrefix": "h100-", "count": 3,
             "allocatable": {"nvidia.com/gpu": 8, "cpu": "96", "memory": "1Ti", "pods": 110},
             "used": {"nvidia.com/gpu": 3, "cpu": "10"},
             "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
             "taints": [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]},
            {"name": "cordoned", "allocatable": {"cpu": "8"}, "unschedulable": True}],
         "podTemplatePatch": {"schedulerName": "kai-scheduler", "labels": {"kai.scheduler/queue": "q"}}},
    ],
}


def test_good_file_and_simulated_cluster():
    f = parse_clusters(GOOD, "clusters.yaml")
    assert f.hub.stagingNamespace == "placer-staging"
    west = simulated_cluster(f.clusters[1])
    assert [n.name for n in west.nodes] == ["h100-0", "h100-1", "h100-2", "cordoned"]
    n = west.nodes[0]
    assert n.allocatable == {"nvidia.com/gpu": 8, "cpu": 96000, "memory": 2**40, "pods": 110}
    assert n.free("nvidia.com/gpu") == 5 and n.free("cpu") == 86000
    assert n.taints[0].key == "dedicated" and west.nodes[3].unschedulable
    assert f.clusters[1].podTemplatePatch.schedulerName == "kai-scheduler"


def _bad(path, value):
    data = yaml.safe_load(yaml.safe_dump(GOOD))
    cur = data
    for p in path[:-1]:
        cur = cur[p]
    if value is KeyError:
        del cur[path[-1]]
    else:
        cur[path[-1]] = value
    return data


@pytest.mark.parametrize("path,value,message", [
    (("clusters", 1, "nodes", 0, "allocatable", "gpu"), 8,
     "clusters.yaml: clusters[1].nodes[0].allocatable.gpu: unknown resource 'gpu'"),
    (("clusters", 1, "nodes", 0, "colour"), "red", "clusters.yaml: clusters[1].nodes[0].colour: unknown field"),
    (("clusters", 1, "nodes", 0, "used", "cpu"), "lots", "clusters.yaml: clusters[1].nodes[0].used: cpu: invalid quantity 'lots'"),
    (("clusters", 1, "nodes", 0, "count"), 0, "clusters.yaml: clusters[1].nodes[0].count:"),
    (("clusters", 1, "nodes", 0, "taints", 0, "effect"), "Never", "clusters.yaml: clusters[1].nodes[0].taints[0].effect:"),
    (("clusters", 1, "name"), "east", "clusters.yaml: clusters[1].name: duplicate cluster name 'east'"),
    (("clusters", 0, "nodes"), [], "clusters.yaml: clusters[0]: give either context"),
    (("clusters", 1, "podTemplatePatch", "schedulername"), "x",
     "clusters.yaml: clusters[1].podTemplatePatch.schedulername: unknown field"),
    (("hub", "namespace"), "x", "clusters.yaml: hub.namespace: unknown field"),
    (("clusters",), [], "clusters.yaml: clusters:"),
])
def test_bad_files_name_the_field(path, value, message):
    with pytest.raises(InputError) as e:
        parse_clusters(_bad(path, value), "clusters.yaml")
    assert str(e.value).startswith(message), str(e.value)
    assert e.value.exit_code == 2


def test_lookup_order(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PLACER_CLUSTERS", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)   # no kubeconfig at all
    monkeypatch.setenv("HOME", str(tmp_path))                # (no ~/.kube/config either)
    bundled = resolve_clusters(None)
    assert bundled.description.startswith("the bundled example fleet")
    assert bundled.clusters and all(not c.live for c in bundled.clusters)
    assert bundled.hub is None
    # the file's live contexts must be in the kubeconfig (a wrong one is bad input, tests/cli/test_bad_config.py)
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:9"}}],
        "users": [{"name": "u", "user": {}}],
        "contexts": [{"name": n, "context": {"cluster": "c", "user": "u"}} for n in ("hub", "kind-east")],
        "current-context": "hub"}))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    (tmp_path / "clusters.yaml").write_text(yaml.safe_dump(GOOD))
    assert resolve_clusters(None).description == "./clusters.yaml"
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump({"clusters": [GOOD["clusters"][1]]}))
    monkeypatch.setenv("PLACER_CLUSTERS", str(other))
    targets = resolve_clusters(None)
    f, desc = targets.file, targets.description
    assert [c.name for c in f.clusters] == ["west"] and "PLACER_CLUSTERS" in desc
    assert resolve_clusters(str(tmp_path / "clusters.yaml")).file.clusters[0].name == "east"


def test_example_file_parses_and_has_a_live_entry():
    from placer.inputs.clusters_file import read_clusters_file
    f = read_clusters_file(example_path())
    assert any(c.live for c in f.clusters) and sum(not c.live for c in f.clusters) >= 3


def test_live_entries_without_inventory_are_errors_not_exceptions(monkeypatch):
    import placer.fleetview.view as view
    from placer.definitions.catalog import load_catalog
    from placer.fleetview.placed import LiveState, Placed
    from placer.model.fleet import Cluster
    monkeypatch.setattr(view, "read_live", lambda kube, entries, catalog, gpu_resources=None: LiveState(
        {e.name: Cluster(e.name, error="unreachable (refused)") for e in entries if e.context}, {}, Placed(), []))
    fleet = view.read_fleet(parse_clusters(GOOD, "x").clusters, object(), load_catalog()).fleet
    assert [c.name for c in fleet.clusters] == ["east", "west"]
    assert fleet.clusters[0].error == "unreachable (refused)" and fleet.clusters[1].reachable


def test_unreadable_and_invalid_yaml(tmp_path):
    from placer.inputs.clusters_file import read_clusters_file
    with pytest.raises(InputError, match="cannot read clusters file"):
        read_clusters_file(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("clusters: [\n")
    with pytest.raises(InputError, match="malformed YAML"):
        read_clusters_file(bad)
