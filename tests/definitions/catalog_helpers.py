"""Builders and checks shared by the per-type catalog tests (tests/definitions/test_catalog_*.py).

Each test file builds its own manifests with these one-liners (no corpus copies) and
runs them through the shipped definition file of its type only, so a broken definition
of another type cannot mask or cause a failure here.
"""

from __future__ import annotations

import copy
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import yaml

from placer.definitions.catalog import Catalog, load_definition_file
from placer.definitions.interpret import interpret, patch_pod_templates
from placer.model.workload import Workload

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

CATALOG_DIR = Path(__file__).resolve().parents[2] / "catalog"
EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples"
GPU = "nvidia.com/gpu"
GI = 2**30


@lru_cache(maxsize=None)
def catalog(*names: str) -> Catalog:
    """A catalog holding only the named shipped definitions (e.g. "jobset")."""
    defs = [d for n in names for d in load_definition_file(CATALOG_DIR / f"{n}.yaml")]
    return Catalog({}, frozenset()).with_definitions(defs)


def container(name: str = "main", *, cpu: str | None = "1", memory: str | None = "1Gi", gpu: int = 0,
              limits_only: bool = False, **extra: Any) -> dict[str, Any]:
    res = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    if gpu:
        res[GPU] = gpu
    resources = {"limits": res} if limits_only else {"requests": res, "limits": dict(res)}
    return {"name": name, "image": f"registry.example.com/{name}:1.0", "resources": resources, **extra}


def template(*containers: Mapping[str, Any], init: Sequence[Mapping[str, Any]] = (),
             labels: Mapping[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    """A PodTemplateSpec; a GPU template by default (one 1-GPU container)."""
    pod_spec: dict[str, Any] = {"containers": list(containers) or [container(gpu=1)], **spec}
    if init:
        pod_spec["initContainers"] = list(init)
    out: dict[str, Any] = {"spec": pod_spec}
    if labels:
        out["metadata"] = {"labels": dict(labels)}
    return out


def cond(type_: str, status: str = "True", reason: str = "", message: str = "") -> dict[str, str]:
    return {"type": type_, "status": status, "reason": reason or type_, "message": message or f"{type_} {status}",
            "lastTransitionTime": "2025-01-01T00:00:00Z"}


def pods_by_instance(w: Workload) -> dict[str, int]:
    return {i.key: i.pods for i in w.instances}


def gangs(w: Workload) -> list[tuple[str, int, int, int]]:
    """(name, pods, minMember, gpus) per gang."""
    return [(g.name, g.pods, g.min_member, g.gpus) for g in w.gangs]


def with_status(obj: Mapping[str, Any], status: Mapping[str, Any] | None) -> dict[str, Any]:
    out = copy.deepcopy(dict(obj))
    if status is not None:
        out["status"] = copy.deepcopy(dict(status))
    return out


# --- mutation round trip -------------------------------------------------------------

PATCH = {
    "labels": {"kueue.x-k8s.io/queue-name": "gpu-queue", "placer.dev/cluster": "east"},
    "annotations": {"placer.dev/plan": "plan-42"},
    "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
    "tolerations": [{"key": "placer.dev/reserved", "operator": "Exists", "effect": "NoSchedule"}],
    "schedulerName": "volcano",
}
_PATCHED = (("metadata", "labels"), ("metadata", "annotations"), ("spec", "nodeSelector"),
            ("spec", "tolerations"), ("spec", "schedulerName"))


def _get(obj: Any, path: Sequence[Any]) -> Any:
    for part in path:
        obj = obj[part]
    return obj


def _shape(w: Workload, selectors: bool = True) -> list[tuple[Any, ...]]:
    return [(i.key, i.replicas, i.pods_per_replica, i.pods, dict(i.pod.requests), i.gpus_per_pod,
             dict(i.selector) if selectors else None) for i in w.instances] + [("gangs", tuple(gangs(w)))]


def check_patch_round_trip(obj: Mapping[str, Any], cat: Catalog, template_paths: Iterable[Sequence[Any]],
                           untouched: Iterable[str] = (), selector_from_labels: bool = False) -> dict[str, Any]:
    """Patch every pod template; check each listed PodTemplateSpec (or Pod) got every
    patch key on top of what it had, nothing else in the object changed, and the patched
    object interprets to the same counts. `untouched` lists instance keys whose pods the
    operator synthesises (not in the object, so nothing to rewrite). With
    `selector_from_labels` (a bare Pod) the selector is the pod's labels, so it gains the
    patched labels instead of staying equal."""
    original = copy.deepcopy(obj)
    before = interpret(obj, cat)
    patched = patch_pod_templates(obj, cat, PATCH)
    assert obj == original, "patching must not modify its input"
    paths = [tuple(p) for p in template_paths]
    for path in paths:
        old, new = _get(original, path), _get(patched, path)
        meta, spec = new.get("metadata") or {}, new["spec"]
        old_meta = old.get("metadata") or {}
        assert meta["labels"] == {**(old_meta.get("labels") or {}), **PATCH["labels"]}, path
        assert meta["annotations"] == {**(old_meta.get("annotations") or {}), **PATCH["annotations"]}, path
        assert spec["nodeSelector"] == {**(old["spec"].get("nodeSelector") or {}), **PATCH["nodeSelector"]}, path
        assert spec["tolerations"] == (old["spec"].get("tolerations") or []) + PATCH["tolerations"], path
        assert spec["schedulerName"] == "volcano", path
    # undo exactly the patched fields: what remains must equal the original
    restored = copy.deepcopy(patched)
    for path in paths:
        old, new = _get(original, path), _get(restored, path)
        for part, key in _PATCHED:
            if key in (old.get(part) or {}):
                new[part][key] = old[part][key]
            else:
                new[part].pop(key, None)
        if "metadata" not in old and new.get("metadata") == {}:
            del new["metadata"]
    assert restored == original
    after = interpret(patched, cat)
    assert _shape(after, not selector_from_labels) == _shape(before, not selector_from_labels)
    if selector_from_labels:
        for a, b in zip(after.instances, before.instances):
            assert dict(a.selector) == {**b.selector, **PATCH["labels"]}
    skip = set(untouched)
    for inst in after.instances:
        if inst.key in skip:
            continue
        assert PATCH["labels"].items() <= inst.pod.labels.items(), inst.key
        assert PATCH["nodeSelector"].items() <= inst.pod.node_selector.items(), inst.key
        assert inst.pod.scheduler_name == "volcano", inst.key
    assert {i.key for i in after.instances} >= skip
    assert len(paths) == len(after.instances) - len(skip), "every instance's template must be listed"
    return patched


def example_object(kind: str) -> dict:
    """A fresh copy of the first `kind` object of examples/<kind in lower case>.yaml."""
    docs = [d for d in yaml.safe_load_all((EXAMPLES / f"{kind.lower()}.yaml").read_text()) if d]
    return copy.deepcopy(next(d for d in docs if d["kind"] == kind))
