"""Storage inside "fits": the PersistentVolumeClaims a group's pods need, and whether each
can bind on a cluster by its StorageClass (pure).

A claim is a volumeClaimTemplate (a StatefulSet's, or a pod's generic ephemeral volume), or
a PersistentVolumeClaim among the group's companions that a pod volume names. It binds
dynamically only through a StorageClass: the one it names, or, when it names none, the
cluster's default (the API server's DefaultStorageClass admission sets it at creation). A
claim that names the empty class (`storageClassName: ""`) or a volume (`volumeName`) binds
to a PersistentVolume made beforehand, which placer does not judge; neither does it judge a
claim the group does not carry (one that already exists on the cluster), nor a cluster whose
StorageClasses are not known (`Cluster.storage_classes` None: a simulated cluster that
declares none).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Iterator

from placer.model import reasons as R
from placer.model.fleet import Cluster
from placer.model.workload import PlacementGroup


@dataclass(frozen=True)
class Claim:
    workload: str              # namespace/name of the workload whose pods need it
    name: str
    storage_class: str | None  # None: names none (the cluster's default applies)


def _walk(value: Any) -> Iterator[Mapping[str, Any]]:
    # the ABC, not typing's alias: its isinstance costs a third (issue 24: 10,000 workloads'
    # specs walked once each in prepare)
    if isinstance(value, Mapping):
        yield value
        for v in value.values():
            yield from _walk(v)
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v)


def _claim_spec(pvc: Any) -> tuple[str, Mapping[str, Any]] | None:
    if not isinstance(pvc, Mapping):
        return None
    meta, spec = pvc.get("metadata") or {}, pvc.get("spec") or {}
    if not isinstance(meta, Mapping) or not isinstance(spec, Mapping) or spec.get("volumeName"):
        return None
    return str(meta.get("name") or ""), spec


def _dynamic(workload: str, name: str, spec: Mapping[str, Any]) -> list[Claim]:
    sc = spec.get("storageClassName")
    if sc == "" or (sc is not None and not isinstance(sc, str)):
        return []                           # static binding (or not a class name): not judged
    return [Claim(workload, name, sc)]


def claims_of(group: PlacementGroup) -> tuple[Claim, ...]:
    """Every claim of the group placer can judge, in the order found."""
    pvcs = {((c.get("metadata") or {}).get("name"), (c.get("metadata") or {}).get("namespace")): c
            for c in group.companions if isinstance(c, Mapping) and c.get("kind") == "PersistentVolumeClaim"}
    out: list[Claim] = []
    for w in group.workloads:
        for node in _walk((w.obj or {}).get("spec")):
            templates = node.get("volumeClaimTemplates")
            for tpl in templates if isinstance(templates, list) else ():
                got = _claim_spec(tpl)
                out += _dynamic(w.key, got[0], got[1]) if got else []
            eph = node.get("ephemeral")
            got = _claim_spec(eph.get("volumeClaimTemplate")) if isinstance(eph, Mapping) else None
            if got:
                out += _dynamic(w.key, f"{node.get('name') or ''} (ephemeral)".strip(), got[1])
            ref = node.get("persistentVolumeClaim")
            name = ref.get("claimName") if isinstance(ref, Mapping) else None
            pvc = pvcs.get((name, w.namespace)) or pvcs.get((name, None))
            got = _claim_spec(pvc)
            if got:
                out += _dynamic(w.key, got[0], got[1])
    return tuple(dict.fromkeys(out))


def storage_reason(claims: tuple[Claim, ...], cluster: Cluster, several: bool) -> R.Reason | None:
    """The first claim that cannot bind on the cluster, as a reason; None if all can (or the
    cluster's StorageClasses are not known). `several`: name the workload in the reason."""
    classes = cluster.storage_classes
    if classes is None:
        return None
    has_default = any(sc.default for sc in classes.values())
    for c in claims:
        if (c.storage_class is None and not has_default) or (c.storage_class is not None
                                                              and c.storage_class not in classes):
            return R.UnboundClaim(c.name, c.storage_class, c.workload if several else "")
    return None
