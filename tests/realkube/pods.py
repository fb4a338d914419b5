"""The pods a placed workload's controllers create, in a real cluster.

Job, Deployment, StatefulSet and Pod are submitted as they are and the real
kube-controller-manager creates their pods. For the catalog's CRD kinds (no operator runs in
the test clusters) the pods placer's interpretation describes are created directly: one pod
per pod of each component instance, from that instance's own pod template in the object
(found through the definition's template path, as the operator copies it), labelled as the
operator labels them (the instance's pod selector). Where the definition assembles part of
the pod from fields (resources, extra containers, nodeSelector... beside or instead of a
template), the pod keeps the template's other fields and takes its containers' requests and
node constraints from placer's interpreted shape: then only the scheduling, not the request
arithmetic, is judged for that pod.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any, Mapping

from kubernetes.client.rest import ApiException

from placer.definitions.catalog import Catalog
from placer.definitions.interpret import definition_for, object_name, template_paths
from placer.model.workload import Instance, Workload

from .cluster import Cluster, container

NATIVE = {("batch/v1", "Job"), ("apps/v1", "Deployment"), ("apps/v1", "StatefulSet"), ("v1", "Pod")}
_TEMPLATE_ONLY = {"labels", "annotations"}           # fields that do not change what the pod asks


def is_native(obj: Mapping[str, Any]) -> bool:
    return (obj.get("apiVersion"), obj.get("kind")) in NATIVE


def materialise(cluster: Cluster, namespace: str, workload: Workload, catalog: Catalog) -> tuple[int, list[str]]:
    """Create the workload's pods (or the object whose controller creates them) in
    `namespace`; returns how many pods to expect, and why the API server refused the pods
    it refused (admission, e.g. a RuntimeClass's)."""
    obj = copy.deepcopy(dict(workload.obj))
    if is_native(obj):
        if obj["kind"] == "StatefulSet":
            # OrderedReady creates pod n+1 once pod n is Ready; without a kubelet none ever is
            obj["spec"]["podManagementPolicy"] = "Parallel"
        try:
            cluster.create(namespace, obj)
        except ApiException as e:
            if e.status not in (403, 422):
                raise
            return workload.pods, [_refusal(obj["metadata"].get("name", ""), e)]
        return workload.pods, []
    pods = operator_pods(workload, catalog)
    refused = []
    for body in pods:
        try:
            cluster.core.create_namespaced_pod(namespace, body)
        except ApiException as e:
            if e.status not in (403, 422):
                raise
            refused.append(_refusal(body["metadata"]["name"], e))
    return len(pods), refused


def _refusal(name: str, e: ApiException) -> str:
    try:
        message = json.loads(e.body or "{}").get("message") or e.reason
    except ValueError:
        message = e.reason
    return f"{name}: {message}"


def _name(*parts: str) -> str:
    text = re.sub(r"[^a-z0-9-]+", "-", "-".join(parts).lower()).strip("-")
    return text[:63].rstrip("-")


def _get(obj: Any, path: list[Any]) -> Any:
    for part in path:
        obj = obj[part] if isinstance(obj, list) else (obj or {}).get(part)
    return obj


def _selector_labels(inst: Instance) -> dict[str, str]:
    labels = dict(inst.selector)
    for e in inst.selector_expressions:
        if e["operator"] == "In":
            labels[e["key"]] = e["values"][0]
        elif e["operator"] == "Exists":
            labels[e["key"]] = "true"
    return labels


def _shape_spec(inst: Instance, template: dict[str, Any] | None = None) -> dict[str, Any]:
    """A pod spec from placer's interpreted shape (requests, node constraints, RuntimeClass)
    over the template's other fields."""
    shape = inst.pod
    spec = {k: v for k, v in copy.deepcopy(template or {}).items()
            if k not in ("containers", "initContainers", "overhead", "nodeSelector", "affinity", "tolerations")}
    spec["containers"] = [container("main", {k: str(v) if k != "cpu" else f"{v}m" for k, v in shape.requests.items()})]
    if shape.node_selector:
        spec["nodeSelector"] = dict(shape.node_selector)
    if shape.affinity_terms:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [dict(t) for t in shape.affinity_terms]}}}
    if shape.tolerations:
        spec["tolerations"] = [dict(t) for t in shape.tolerations]
    runtime_class = getattr(shape, "runtime_class", None)    # (so the judge also runs older placers)
    if runtime_class:
        spec["runtimeClassName"] = runtime_class
    return spec


def _sort_key(inst: Instance) -> tuple:
    r = inst.pod.requests
    return (-inst.gpus_per_pod, -r.get("cpu", 0), -r.get("memory", 0))


def operator_pods(workload: Workload, catalog: Catalog) -> list[dict[str, Any]]:
    """Pod bodies for a CRD workload, biggest pods first (the order placer packs them in;
    the scheduler takes pods of equal priority in creation order)."""
    obj = workload.obj
    compiled = definition_for(obj, catalog)
    per_component = template_paths(compiled, obj, object_name(obj), None)[:-1]
    rows = [row for comp_rows in per_component for row in comp_rows]
    columns = [compiled.layout.columns[i] for i, comp_rows in enumerate(per_component) for _ in comp_rows]
    if len(rows) != len(workload.instances):
        raise ValueError(f"{workload.key}: {len(rows)} template paths for {len(workload.instances)} instances")
    out = []
    ordered = sorted(zip(workload.instances, rows, columns), key=lambda t: _sort_key(t[0]))
    for inst, row, cols in ordered:
        template = _get(obj, row["template"]) if isinstance(row.get("template"), list) else None
        overrides = {f for f, _ in cols.fields} - _TEMPLATE_ONLY
        tpl_spec = (template.get("spec") or {}) if isinstance(template, dict) else None
        if tpl_spec is not None and not overrides:
            spec = copy.deepcopy(tpl_spec)
            labels = dict((template.get("metadata") or {}).get("labels") or {})
        else:
            spec, labels = _shape_spec(inst, tpl_spec), dict(inst.pod.labels)
        labels.update(_selector_labels(inst))
        spec.setdefault("terminationGracePeriodSeconds", 0)
        for k in range(inst.pods):
            out.append({"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": _name(workload.name, inst.component, inst.instance, str(k)),
                                     "labels": labels},
                        "spec": copy.deepcopy(spec)})
    return out
