"""Pure: what a server or a controller wrote into an object, taken out before the object
travels to another cluster.

An object read back from a cluster (a staging object on the hub, a companion) carries
what that cluster generated: a Job's selector and the `controller-uid` / `job-name`
labels built from the hub's uid, a Service's cluster IPs and node ports, a claim's bound
volume, a Deployment's revision. A target refuses some of them (a Job whose selector is
not its own: "'selector' not auto-generated") and would act wrongly on others (an IP of
the hub's range). `strip_generated` removes them, kind by kind; what the user wrote stays
(a Job with `manualSelector: true` keeps its selector, a headless Service its `None`).

`spec.managedBy: placer.dev/daemon` (the marker that keeps the hub's own Job and JobSet
controllers off a staged object, as Kueue's MultiKueue does) never travels either: on the
target, the target's controllers must run the copy.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

# what `spec.managedBy` says on a staged Job or JobSet so that the hub's controllers leave it alone
MANAGED_BY = "placer.dev/daemon"

# labels the Job API (its strategy on create) writes from the Job's uid and name
JOB_GENERATED_LABELS = ("controller-uid", "batch.kubernetes.io/controller-uid", "job-name",
                        "batch.kubernetes.io/job-name")

# annotations controllers write on the objects they manage
GENERATED_ANNOTATIONS = ("deployment.kubernetes.io/revision", "pv.kubernetes.io/bind-completed",
                         "pv.kubernetes.io/bound-by-controller", "volume.beta.kubernetes.io/storage-provisioner",
                         "volume.kubernetes.io/storage-provisioner", "volume.kubernetes.io/selected-node")

# the projected volume the ServiceAccount admission plugin adds to every pod (and its mounts)
SERVICE_ACCOUNT_VOLUME = "kube-api-access-"


def _drop(mapping: Any, keys: tuple[str, ...]) -> None:
    if isinstance(mapping, dict):
        for k in keys:
            mapping.pop(k, None)


def _job(obj: dict[str, Any]) -> None:
    """The selector and labels the Job API generated, unless the user chose them
    (`manualSelector: true`)."""
    spec = obj.get("spec")
    if not isinstance(spec, dict) or spec.get("manualSelector"):
        return
    spec.pop("selector", None)
    _drop((spec.get("template") or {}).get("metadata", {}).get("labels"), JOB_GENERATED_LABELS)
    _drop(obj.get("metadata", {}).get("labels"), JOB_GENERATED_LABELS)
    _empty_labels((spec.get("template") or {}).get("metadata"))
    _empty_labels(obj.get("metadata"))


def _empty_labels(meta: Any) -> None:
    if isinstance(meta, dict) and meta.get("labels") == {}:
        meta.pop("labels")


def _pod_spec(spec: Any) -> None:
    """The ServiceAccount token volume (and its mounts) the hub's admission added."""
    if not isinstance(spec, dict):
        return
    vols = spec.get("volumes")
    if not isinstance(vols, list):
        return
    generated = {v.get("name") for v in vols if isinstance(v, dict) and str(v.get("name", "")).startswith(
        SERVICE_ACCOUNT_VOLUME) and "projected" in v}
    if not generated:
        return
    spec["volumes"] = [v for v in vols if not (isinstance(v, dict) and v.get("name") in generated)]
    if not spec["volumes"]:
        spec.pop("volumes")
    for key in ("containers", "initContainers", "ephemeralContainers"):
        for c in spec.get(key) or ():
            if isinstance(c, dict) and isinstance(c.get("volumeMounts"), list):
                c["volumeMounts"] = [m for m in c["volumeMounts"] if m.get("name") not in generated]
                if not c["volumeMounts"]:
                    c.pop("volumeMounts")


def _pod(obj: dict[str, Any]) -> None:
    _pod_spec(obj.get("spec"))


def _service(obj: dict[str, Any]) -> None:
    """Allocated cluster IPs (a headless Service's `None` is the user's), the IP families
    they were allocated from, node ports and the health-check node port."""
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    if spec.get("clusterIP") != "None":
        spec.pop("clusterIP", None)
        spec.pop("clusterIPs", None)
    if spec.get("ipFamilyPolicy") in (None, "SingleStack"):     # the default: families the hub chose
        spec.pop("ipFamilyPolicy", None)
        spec.pop("ipFamilies", None)
    spec.pop("healthCheckNodePort", None)
    for port in spec.get("ports") or ():
        if isinstance(port, dict):
            port.pop("nodePort", None)


def _claim(obj: dict[str, Any]) -> None:
    """The volume the hub's PersistentVolume controller bound the claim to."""
    spec = obj.get("spec")
    if isinstance(spec, dict):
        spec.pop("volumeName", None)


def _statefulset(obj: dict[str, Any]) -> None:
    """Claim templates as the API server returns them carry a status."""
    for t in (obj.get("spec") or {}).get("volumeClaimTemplates") or ():
        if isinstance(t, dict):
            t.pop("status", None)
            _drop(t.get("metadata"), ("creationTimestamp",))


def _managed_by(obj: dict[str, Any]) -> None:
    spec = obj.get("spec")
    if isinstance(spec, dict) and spec.get("managedBy") == MANAGED_BY:
        spec.pop("managedBy")


BY_KIND: Mapping[tuple[str, str], Callable[[dict[str, Any]], None]] = {
    ("batch", "Job"): _job,
    ("", "Pod"): _pod,
    ("", "Service"): _service,
    ("", "PersistentVolumeClaim"): _claim,
    ("apps", "StatefulSet"): _statefulset,
}


def strip_generated(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` (changed in place, and returned) without what a server or a controller of the
    cluster it was read from generated."""
    group = str(obj.get("apiVersion") or "").rpartition("/")[0]
    fix = BY_KIND.get((group, str(obj.get("kind") or "")))
    if fix is not None:
        fix(obj)
    _managed_by(obj)
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        _drop(meta.get("annotations"), GENERATED_ANNOTATIONS)
    return obj
