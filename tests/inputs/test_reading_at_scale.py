"""Reading large inputs does per distinct value what it did per occurrence (issue 24, item 3:
a clusters file written node by node took seconds, mostly re-judging the same resource
names and YAML scalars). Counted, not timed."""

from __future__ import annotations

import yaml

from placer.inputs import clusters_file as CF
from placer.inputs import resources as RES
from placer.model import documents as D


def _per_node_file(n: int) -> str:
    nodes = [{"name": f"gpu-{i}", "allocatable": {"nvidia.com/gpu": 8, "cpu": "96", "memory": "1Ti", "pods": 110},
              "used": {"cpu": f"{100 + i % 700}m"}, "labels": {"kubernetes.io/hostname": f"gpu-{i}", "pool": "a"}}
             for i in range(n)]
    return yaml.safe_dump({"clusters": [{"name": "east", "nodes": nodes}]})


def test_resource_names_judged_once_per_name_not_per_node(tmp_path, monkeypatch):
    path = tmp_path / "clusters.yaml"
    path.write_text(_per_node_file(2000))
    calls = []
    edits = RES._edits
    monkeypatch.setattr(RES, "_edits", lambda a, b: calls.append((a, b)) or edits(a, b))
    if hasattr(RES._resource_name, "cache_clear"):
        RES._resource_name.cache_clear()
    parsed = CF.read_clusters_file(path)
    cluster = CF.simulated_cluster(parsed.clusters[0])
    assert len(cluster.nodes) == 2000
    assert cluster.nodes[1999].allocatable["nvidia.com/gpu"] == 8
    # 4 names (gpu, cpu, memory, pods): each compared with the known GPU names once at most
    assert len(calls) <= 4 * len(RES.KNOWN_GPU_RESOURCES)


def test_yaml_scalars_resolved_once_per_distinct_text(monkeypatch):
    calls = []
    resolve = yaml.resolver.BaseResolver.resolve

    def counting(self, kind, value, implicit):
        if kind is yaml.ScalarNode:
            calls.append(value)
        return resolve(self, kind, value, implicit)

    monkeypatch.setattr(yaml.resolver.BaseResolver, "resolve", counting)
    text = "items:\n" + "".join(f"- {{a: '1', b: 2, c: true, d: x{i % 10}}}\n" for i in range(3000))
    [(doc, _)] = list(D.load_yaml(text, "t.yaml"))
    assert doc["items"][2999] == {"a": "1", "b": 2, "c": True, "d": "x9"}
    assert len(calls) < 100                       # 3,000 x 8 scalars, 17 distinct (text, style)


def test_resolved_tags_do_not_depend_on_what_was_read_before():
    # the same text plain and quoted: int and string; null and "null"
    [(doc, _)] = list(D.load_yaml("a: 10\nb: '10'\nc: null\nd: 'null'\ne: 1e3\nf: yes\n", "t.yaml"))
    assert doc == {"a": 10, "b": "10", "c": None, "d": "null", "e": "1e3", "f": True}
    [(again, _)] = list(D.load_yaml("b: '10'\na: 10\nd: 'null'\nc: null\n", "t.yaml"))
    assert again == {"b": "10", "a": 10, "d": "null", "c": None}
