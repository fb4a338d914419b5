"""placer builds YAML documents with a trimmed constructor (issue 24, item 3: PyYAML's Python
constructor cost more than libyaml's parse on 10,000 manifests). The judge is PyYAML's own
safe constructor: on every manifest of examples/, catalog/, tests/fixtures and the upstream
corpus (../shared/corpus/upstream, read in place) and on YAML's corner cases, both give the
same values of the same types in the same key order, the same sharing of aliased nodes, or
the same error."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from placer.model import documents as D

ROOT = Path(__file__).resolve().parents[2]


def _shared_upstream() -> Path | None:
    for base in (ROOT.parent, ROOT.parent.parent):        # the checkout, or a worktree one level down
        found = base / "shared" / "corpus" / "upstream"
        if found.is_dir():
            return found
    return None


def _files() -> list[Path]:
    dirs = [ROOT / "examples", ROOT / "catalog", ROOT / "tests" / "fixtures"]
    upstream = _shared_upstream()
    if upstream is not None:
        dirs += [upstream, upstream.parent / "karta"]
    return sorted(p for d in dirs for p in d.rglob("*") if p.suffix in (".yaml", ".yml") and p.is_file())


def typed(v, seen=None):
    """The value with every type spelled out (True is not 1, 1.0 is not 1), dict keys in
    order, and each shared container (an alias) named by where it was first met."""
    seen = {} if seen is None else seen
    if isinstance(v, (dict, list)):
        if id(v) in seen:
            return ("alias", seen[id(v)])
        seen[id(v)] = len(seen)
        if isinstance(v, dict):
            return ("dict", [(typed(k, seen), typed(x, seen)) for k, x in v.items()])
        return ("list", [typed(x, seen) for x in v])
    if isinstance(v, float) and math.isnan(v):
        return ("float", "nan")
    return (type(v).__name__, v)


def _outcome(text: str, build) -> list:
    """Per document: its typed value or its error, built by `build(loader, node)`."""
    loader = D._Loader(text)
    out: list = []
    try:
        while loader.check_node():
            node = loader.get_node()
            try:
                out.append(typed(build(loader, node)))
            except Exception as e:      # noqa: BLE001 - the error itself is what is compared
                out.append(("error", type(e).__name__, str(e)))
                break
    except yaml.YAMLError as e:
        out.append(("parse error", str(e)))
    finally:
        loader.dispose()
    return out


def pyyaml(loader, node):
    return loader.construct_document(node)


def built(loader, node):
    """placer's one-walk build, unchecked: PyYAML's where the walk gives up (the reader's own
    fallback, without check_tree, so that what is compared is the build alone)."""
    try:
        return D._tree(loader, node, {}, [D.MAX_VALUES])
    except Exception:          # noqa: BLE001 - _Slow, or a bad value: PyYAML says it
        return loader.construct_document(node)


FILES = _files()


def test_the_corpus_is_there():
    assert len([f for f in FILES if "examples" in f.parts]) >= 5
    if _shared_upstream() is None:
        pytest.skip("../shared/corpus/upstream is absent: read in place, never copied")
    assert len(FILES) >= 100


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(p.parents[2])))
def test_every_manifest_builds_as_pyyaml_builds_it(path):
    text = path.read_text(encoding="utf-8-sig")
    assert _outcome(text, built) == _outcome(text, pyyaml)


CORNERS = [
    "a: 10\nb: '10'\nc: 010\nd: 0x1F\ne: 0b101\nf: +1_000\ng: -12\nh: 1:20\ni: 0o17\n",
    "a: 1.5\nb: 1e3\nc: 1.0e+3\nd: .inf\ne: -.Inf\nf: .NaN\ng: 1_0.5\nh: 6.8523015e+5\ni: 190:20:30.15\n",
    "a: yes\nb: No\nc: on\nd: OFF\ne: y\nf: n\ng: true\nh: False\ni: ~\nj: null\nk:\nl: ''\nm: Null\n",
    "a: &x {b: 1, c: [1, 2]}\nd: *x\ne: [*x, *x]\n",
    "base: &b {cpu: 1, gpu: 2}\nnode:\n  <<: *b\n  gpu: 4\n",
    "base: &b {cpu: 1}\nmore: &m {mem: 2}\nnode: {<<: [*b, *m], x: 1}\n",
    "=: value key\na: 1\n",
    "a: !!str 10\nb: !!int '12'\nc: !!float '3'\nd: !!bool 'yes'\ne: !!null ''\n",
    "a: !!binary aGVsbG8=\nb: !!set {x, y}\nc: !!omap [{a: 1}, {b: 2}]\nd: !!pairs [{a: 1}]\n",
    "a: 2024-01-02\nb: 2024-01-02T03:04:05Z\nc: 2024-01-02 03:04:05.5 +01:00\n",
    "a: !!str {b: 1}\n",
    "a: !!int [1]\n",
    "a: !!seq {b: 1}\n",
    "a: !!map [1]\n",
    "? [a, b]\n: c\n",
    "? {a: 1}\n: c\n",
    "? !!str [a]\n: c\n",
    "1: one\n2.5: two\ntrue: three\n~: four\n2024-01-02: five\n",
    "a: 1\na: 2\nb: 3\na: 4\n",
    "a: !foo bar\n",
    "a: !!int abc\n",
    "a: !!float abc\nb: !!int xyz\n",
    "&r a: 1\n",
    "a: &r [1, *r]\n",
    "a: &r {b: *r}\n",
    "- 1\n- two\n- {x: y}\n",
    "plain scalar document\n",
    "--- 1\n--- [a]\n--- {a: 1}\n---\n",
    "a: |\n  block\n  text\nb: >\n  folded\n  text\nc: \"dq\\tescape\"\n",
    "a: {b: {c: {d: [[[{e: 1}]]]}}}\n",
    "k: " + "[" * 150 + "]" * 150 + "\n",
    "k: " + "{a: " * 120 + "1" + "}" * 120 + "\n",
]


@pytest.mark.parametrize("text", CORNERS)
def test_yaml_corner_cases_build_as_pyyaml_builds_them(text):
    assert _outcome(text, built) == _outcome(text, pyyaml)


def test_plain_manifests_never_take_pyyamls_constructor(monkeypatch):
    """The examples are built by the trimmed constructor alone (counted, not timed)."""
    calls = []
    full = D._Loader.construct_document
    monkeypatch.setattr(D._Loader, "construct_document", lambda self, node: calls.append(node) or full(self, node))
    docs = [doc for f in sorted((ROOT / "examples").rglob("*.yaml"))
            for doc, _ in D.load_yaml(f.read_text(), str(f))]
    assert len(docs) >= 10
    assert calls == []


def test_merge_keys_and_tags_still_take_pyyamls_constructor(monkeypatch):
    calls = []
    full = D._Loader.construct_document
    monkeypatch.setattr(D._Loader, "construct_document", lambda self, node: calls.append(node) or full(self, node))
    [(doc, _)] = list(D.load_yaml("base: &b {cpu: 1}\nnode: {<<: *b, gpu: 2}\n", "t.yaml"))
    assert doc["node"] == {"cpu": 1, "gpu": 2} and len(calls) == 1


def test_an_alias_is_the_same_object_as_pyyaml_makes_it():
    [(doc, _)] = list(D.load_yaml("a: &x {b: [1]}\nc: *x\n", "t.yaml"))
    assert doc["a"] is doc["c"]


def _loaded(text: str, build, max_values: int) -> list:
    """Per document of `text`: its typed, checked value, or the error it raises."""
    return _outcome(text, lambda loader, node: build(loader, node, node.start_mark.line + 1, max_values))


def checked_by_pyyaml(loader, node, line, max_values):
    return D.check_tree(loader.construct_document(node), "t.yaml", line, max_values=max_values)


def checked_in_one_walk(loader, node, line, max_values):
    return D.checked(loader, node, "t.yaml", line, max_values)


CHECKED_CORNERS = CORNERS + [
    "a: 9223372036854775807\nb: -9223372036854775808\n",
    "a: 9223372036854775808\n",
    "a: [1, 2, -9223372036854775809]\n",
    "a: {b: .nan}\n",
    "a: &x {b: [1, 2, 3], c: {d: 4}}\ne: *x\nf: [*x, *x, *x]\n",
    "a: &x [1, 2, 3, 4, 5, 6]\nb: [*x, *x, *x, *x]\n",
    "x: &d " + "[" * 60 + "1" + "]" * 60 + "\ny: " + "[" * 39 + "*d" + "]" * 39 + "\n",
    "x: &d " + "[" * 60 + "1" + "]" * 60 + "\ny: " + "[" * 40 + "*d" + "]" * 40 + "\n",
    "k: " + "[" * 99 + "]" * 99 + "\n",
    "k: " + "[" * 99 + "1" + "]" * 99 + "\n",
    "k: " + "[" * 100 + "]" * 100 + "\n",
    "a: {1: x}\n",
    "when: 2024-01-02\nlist: [2024-01-02T03:04:05Z]\n",
]


@pytest.mark.parametrize("max_values", [8, 12, 30, D.MAX_VALUES])
@pytest.mark.parametrize("text", CHECKED_CORNERS)
def test_a_document_checked_in_one_walk_reads_as_pyyaml_and_check_tree_read_it(text, max_values):
    """The same value or the same one-line error, whichever walk built it: values counted
    with their aliases expanded, depth and scalars judged as check_tree judges them."""
    assert _loaded(text, checked_in_one_walk, max_values) == _loaded(text, checked_by_pyyaml, max_values)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(p.parents[2])))
def test_every_manifest_checked_in_one_walk_reads_as_before(path):
    text = path.read_text(encoding="utf-8-sig")
    for max_values in (50, D.MAX_VALUES):
        assert _loaded(text, checked_in_one_walk, max_values) == _loaded(text, checked_by_pyyaml, max_values)


def test_aliased_manifests_stay_on_the_one_walk(monkeypatch):
    """`yaml.dump` writes a dict used twice as an anchor and an alias (a Deployment's
    selector and template labels): such documents are built by the trimmed walk too."""
    calls = []
    full = D._Loader.construct_document
    monkeypatch.setattr(D._Loader, "construct_document", lambda self, node: calls.append(node) or full(self, node))
    text = ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\nspec:\n  selector:\n"
            "    matchLabels: &id001\n      app: d\n  template:\n    metadata:\n      labels: *id001\n")
    [(doc, _)] = list(D.load_yaml(text, "t.yaml"))
    assert doc["spec"]["template"]["metadata"]["labels"] is doc["spec"]["selector"]["matchLabels"]
    assert calls == []
