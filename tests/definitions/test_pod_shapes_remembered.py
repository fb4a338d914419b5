"""Pod shapes are remembered by value (issue 24: a run's workloads repeat a few hundred pod
templates). The judge is the shape read afresh (`read_pod_shape`): on every manifest of
examples/ and the shared corpus, interpreted cold and again warm, the workloads are those
read without the memory, in the same order; values that only look alike (1, 1.0, true,
"1", keys in another order) are never taken for one another; errors are never remembered."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from placer.definitions import interpret as I
from placer.definitions import pods as P
from placer.definitions.catalog import load_catalog
from placer.definitions.program import Columns
from placer.model.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = Columns.of(("id", "tpl"))
WITH_FIELDS = Columns.of(("id", "tpl", "f.labels", "f.resources", "f.mainContainer"))


def _manifests() -> list[dict]:
    dirs = [ROOT / "examples", ROOT.parent / "shared" / "corpus"]
    return [d for base in dirs if base.is_dir() for f in sorted(base.rglob("*.y*ml"))
            for d in yaml.load_all(f.read_text(encoding="utf-8-sig"), Loader=yaml.CSafeLoader)
            if isinstance(d, dict) and "kind" in d]


def _outcome(obj, catalog):
    try:
        return repr(I.interpret(obj, catalog))         # repr: maps compared in their order too
    except Exception as e:  # noqa: BLE001 - the error itself is what is compared
        return f"{type(e).__name__}: {e}"


def test_every_manifest_reads_as_without_the_memory(monkeypatch):
    catalog = load_catalog(())
    objs = [o for o in _manifests() if catalog.lookup(str(o.get("apiVersion")), str(o.get("kind")))]
    assert len(objs) >= 30
    P._SHAPES.clear()
    cold = [_outcome(o, catalog) for o in objs]
    warm = [_outcome(o, catalog) for o in objs]
    assert P._SHAPES, "shapes were remembered"
    monkeypatch.setattr(I, "pod_shape", P.read_pod_shape)
    judged = [_outcome(o, catalog) for o in objs]
    assert cold == judged and warm == judged


def _tpl(requests, labels=None):
    return {"metadata": {"labels": labels or {}},
            "spec": {"containers": [{"name": "m", "resources": {"requests": requests}}]}}


LOOKALIKES = [
    ["0", _tpl({"cpu": 1, "nvidia.com/gpu": 1})],
    ["0", _tpl({"cpu": 1.0, "nvidia.com/gpu": 1})],
    ["0", _tpl({"cpu": "1", "nvidia.com/gpu": 1})],
    ["0", _tpl({"cpu": "1", "nvidia.com/gpu": 1.5})],
    ["0", _tpl({"nvidia.com/gpu": 1, "cpu": "1"})],
    ["0", _tpl({"cpu": "1"}, {"a": "1", "b": "2"})],
    ["0", _tpl({"cpu": "1"}, {"b": "2", "a": "1"})],
    ["0", _tpl({"cpu": "1"}, {"a": "true"})],
    ["0", _tpl({"cpu": 10**30})],                     # beyond what orjson writes
]


@pytest.mark.parametrize("order", [1, -1])
def test_lookalike_values_are_never_taken_for_one_another(order):
    P._SHAPES.clear()
    for row in LOOKALIKES[::order] * 2:
        try:
            want = repr(P.read_pod_shape(row, TEMPLATE))
        except InputError as e:
            want = e.message
        try:
            got = repr(P.pod_shape(row, TEMPLATE))
        except InputError as e:
            got = e.message
        assert got == want, row


def test_the_same_values_under_other_columns_are_read_for_those_columns():
    tpl = _tpl({"cpu": "1"})
    P._SHAPES.clear()
    plain = P.pod_shape(["0", tpl, None, None, None], WITH_FIELDS)
    merged = P.pod_shape(["0", tpl, {"x": "y"}, {"requests": {"cpu": "3"}}, None], WITH_FIELDS)
    assert plain.requests == {"cpu": 1000} and merged.requests == {"cpu": 3000} and merged.labels == {"x": "y"}
    assert P.pod_shape(["0", tpl], TEMPLATE) == P.read_pod_shape(["0", tpl], TEMPLATE)


def test_a_shape_is_read_once_per_value_and_errors_every_time(monkeypatch):
    reads = []
    real = P.read_pod_shape
    monkeypatch.setattr(P, "read_pod_shape", lambda row, c: reads.append(row) or real(row, c))
    P._SHAPES.clear()
    for _ in range(3):
        P.pod_shape(["a", _tpl({"cpu": "2"})], TEMPLATE)
    assert len(reads) == 1
    bad = ["b", {"spec": {"containers": {}}}]
    for n in range(2, 4):
        with pytest.raises(InputError):
            P.pod_shape(bad, TEMPLATE)
        assert len(reads) == n


def test_the_memory_is_bounded(monkeypatch):
    monkeypatch.setattr(P, "_SHAPES_MAX", 3)
    P._SHAPES.clear()
    for n in range(10):
        P.pod_shape(["0", _tpl({"cpu": str(n + 1)})], TEMPLATE)
        assert len(P._SHAPES) <= 3
