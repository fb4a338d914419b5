"""Placement groups: by file, or by `placer.dev/group` across files; companions follow."""

from __future__ import annotations

import yaml

from placer.definitions.catalog import load_catalog
from placer.inputs.manifests import load_groups, read_documents
from tests.cli.test_cli_describe import DEFINITION, widget


def _write(path, *docs):
    path.write_text(yaml.safe_dump_all(list(docs)))
    return str(path)


def test_groups_by_annotation_across_files_and_unreferenced_companions_follow(tmp_path):
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
    # a1 and a2 share nothing: two groups; the unreferenced ConfigMap goes with each, and says so
    assert sorted(groups) == sorted([f"{a}#ml/a1", f"{a}#ml/a2", "llm", f"{c}#ml/c2"])
    for key in (f"{a}#ml/a1", f"{a}#ml/a2"):
        assert [o["metadata"]["name"] for o in groups[key].companions] == ["cfg"]
        assert groups[key].companions[0]["metadata"]["annotations"]["placer.dev/shared"] == "true"
        assert "ConfigMap cfg" in groups[key].notes[0] and "referenced by no workload" in groups[key].notes[0]
    assert [w.name for w in groups["llm"].workloads] == ["b1", "c1"]
    assert [o["metadata"]["name"] for o in groups["llm"].companions] == ["llm-cfg"]
    assert [w.name for w in groups[f"{c}#ml/c2"].workloads] == ["c2"]
    assert groups["llm"].gpus == 16


def test_a_file_whose_workloads_are_one_group_keeps_the_file_as_key(tmp_path):
    (tmp_path / "defs").mkdir()
    (tmp_path / "defs" / "widget.yaml").write_text(DEFINITION)
    cat = load_catalog([tmp_path / "defs"])
    a = _write(tmp_path / "a.yaml", widget("a1"), {"apiVersion": "v1", "kind": "ConfigMap",
                                                   "metadata": {"name": "cfg"}})
    [g] = load_groups([a], cat)
    assert g.key == a and g.notes == () and "placer.dev/shared" not in str(g.companions)


def test_documents_keep_their_line_and_v1_lists_expand(tmp_path):
    f = tmp_path / "l.yaml"
    f.write_text("# comment\n---\n" + yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [widget("x"), widget("y")]}))
    docs = read_documents([str(f)])
    assert [d.obj["metadata"]["name"] for d in docs] == ["x", "y"]
    assert docs[0].where == f"{f}:3"


def test_one_object_given_twice_is_bad_input_naming_both_places(tmp_path):
    import pytest

    from placer.model.errors import InputError
    (tmp_path / "defs").mkdir()
    (tmp_path / "defs" / "widget.yaml").write_text(DEFINITION)
    cat = load_catalog([tmp_path / "defs"])
    a = _write(tmp_path / "a.yaml", widget("a1"), widget("a2"))
    b = _write(tmp_path / "b.yaml", widget("b1"), widget("a1"))
    with pytest.raises(InputError) as e:
        load_groups([a, b], cat)
    assert e.value.exit_code == 2
    assert "ml/Widget" in str(e.value) and "/a1 is given twice (first at " in str(e.value)
    assert f"{a}:1" in str(e.value) and f"{b}:" in str(e.value)
    # the same file twice on the line is the same objects twice
    with pytest.raises(InputError, match="given twice"):
        load_groups([a, a], cat)
    # another namespace, or another kind's name, is another object
    c = _write(tmp_path / "c.yaml", {**widget("a1"), "metadata": {"name": "a1", "namespace": "other"}})
    assert len(load_groups([a, c], cat)) == 3
