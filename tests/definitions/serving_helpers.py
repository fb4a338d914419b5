"""Mutation check for definitions whose pod template is not a PodTemplateSpec (inline
PodSpecs, fragmented fields): patch, then (1) every changed leaf of the object lies under
one of the paths the caller allows, (2) re-interpreting gives the same counts, requests,
selectors and gangs, (3) every instance's pod shape carries every patch key on top of
what it had. Used by the serving/LWS/Grove/Dynamo/Milvus catalog tests."""

from __future__ import annotations

import copy
from typing import Any, Iterable, Mapping, Sequence

from placer.definitions.catalog import Catalog
from placer.definitions.interpret import interpret, patch_pod_templates
from tests.definitions.catalog_helpers import PATCH, gangs


def changed_leaves(a: Any, b: Any, path: tuple = ()) -> list[tuple]:
    if a is None and isinstance(b, dict):       # a section the patch created
        a = {}
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in set(a) | set(b):
            out += changed_leaves(a.get(k), b.get(k), path + (k,))
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b)):
            out += changed_leaves(x, y, path + (i,))
        return out
    return [] if a == b else [path]


def shape(w) -> list:
    return [(i.key, i.replicas, i.pods_per_replica, i.pods, dict(i.pod.requests), i.gpus_per_pod,
             dict(i.selector)) for i in w.instances] + [("gangs", tuple(gangs(w)))]


def check_patch(obj: Mapping[str, Any], cat: Catalog, allowed: Iterable[Sequence[Any]],
                no_labels: Iterable[str] = ()) -> dict[str, Any]:
    """`allowed`: path prefixes the patch may write under; `no_labels`: instance keys whose
    pods get no labels from the object (documented operator behaviour)."""
    original = copy.deepcopy(obj)
    before = interpret(obj, cat)
    patched = patch_pod_templates(obj, cat, PATCH)
    assert obj == original, "patching must not modify its input"
    prefixes = [tuple(p) for p in allowed]
    changed = changed_leaves(original, patched)
    assert changed, "the patch changed nothing"
    stray = [p for p in changed if not any(p[:len(q)] == q for q in prefixes)]
    assert not stray, f"patch wrote outside the pod templates: {stray}"
    after = interpret(patched, cat)
    assert shape(after) == shape(before)
    skip = set(no_labels)
    for old, new in zip(before.instances, after.instances):
        pod = new.pod
        if new.key not in skip:
            assert pod.labels == {**old.pod.labels, **PATCH["labels"]}, new.key
        assert pod.annotations == {**old.pod.annotations, **PATCH["annotations"]}, new.key
        assert pod.node_selector == {**old.pod.node_selector, **PATCH["nodeSelector"]}, new.key
        assert list(pod.tolerations) == list(old.pod.tolerations) + PATCH["tolerations"], new.key
        assert pod.scheduler_name == PATCH["schedulerName"], new.key
    # patching twice changes nothing more (tolerations appended once)
    assert patch_pod_templates(patched, cat, PATCH) == patched
    return patched
