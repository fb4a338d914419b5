"""Placement groups: by file, or by `placer.dev/group` across files; companions follow."""

from __future__ import annotations

import yaml

from placer.catalog import load_catalog
from placer.manifests import load_groups, read_documents
from tests.test_cli_describe import DEFINITION, widget


def _write(path, *docs):
    path.write_text(yaml.safe_dump_all(list(docs)))
    return str(path)


def test_groups_by_file_and_by_annotation(tmp_path):
    (tmp_path / "defs").mkdir()
    (tmp_path / "defs" / "widget.yaml").write_text(DEFINITION)
    cat = load_catalog([tmp_path / "defs"])
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}}
    shared = {"placer.dev/group": "llm"}
    a = _write(tmp_path / "a.yaml", widget("a1"), widget("a2"), cm)
    b = _write(tmp_path / "b.yaml", widget("b1", annotations=shared),
               {**cm, "metadata": {"name": "llm-cfg", "annotations": shared}})
    c = _write(tmp_path / "c.yaml", widget("c1", annotations=shared), widget("c2"))
    groups = {g.key: g for g in load_groups([a, b, c], cat)}
    assert sorted(groups) == sorted([a, "llm", c])
    assert [w.name for w in groups[a].workloads] == ["a1", "a2"]
    assert [o["metadata"]["name"] for o in groups[a].companions] == ["cfg"]
    assert [w.name for w in groups["llm"].workloads] == ["b1", "c1"]
    assert [o["metadata"]["name"] for o in groups["llm"].companions] == ["llm-cfg"]
    assert [w.name for w in groups[c].workloads] == ["c2"]
    assert groups["llm"].gpus == 16


def test_documents_keep_their_line_and_v1_lists_expand(tmp_path):
    f = tmp_path / "l.yaml"
    f.write_text("# comment\n---\n" + yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [widget("x"), widget("y")]}))
    docs = read_documents([str(f)])
    assert [d.obj["metadata"]["name"] for d in docs] == ["x", "y"]
    assert docs[0].where == f"{f}:3"
