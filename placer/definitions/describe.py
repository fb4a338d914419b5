"""Rendering interpreted workloads: the JSON contract of `placer describe -o json`, and
the tree shown as a table. Pure: values in, plain data or rich renderables out."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from rich.markup import escape
from rich.tree import Tree

from placer.definitions.catalog import PLACER_FORMAT, CompiledDefinition
from placer.definitions.warnings import definition_warnings
from placer.model.quantity import format_quantity, to_json_number
from placer.model.topology import TopologyRequest
from placer.model.words import plural
from placer.model.workload import Instance, Workload


def resources_json(resources: Mapping[str, int]) -> dict[str, int | float]:
    return {name: to_json_number(name, v) for name, v in sorted(resources.items())}


def instance_json(inst: Instance) -> dict[str, Any]:
    return {"component": inst.component, "instance": inst.instance, "replicas": inst.replicas,
            "podsPerReplica": inst.pods_per_replica, "pods": inst.pods,
            "podResources": resources_json(inst.pod.requests), "gpusPerPod": inst.gpus_per_pod,
            "gpus": inst.gpus, "selector": inst.selector_string()}


def workload_json(w: Workload, pods_by_component: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
                  served: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The `describe -o json` element. Keys are a contract other tools read: add, never rename.
    `served`: which definition served the workload (`definitionFormat`, `definitionSource`,
    and `warnings` when there are any), as `served_by` tells."""
    out: dict[str, Any] = {
        "apiVersion": w.api_version, "kind": w.kind, "namespace": w.namespace, "name": w.name,
        "definition": w.definition, "phase": w.phase.value, "reason": w.reason, "message": w.message,
        "suspended": w.suspended, "pods": w.pods, "gpus": w.gpus, "resources": resources_json(w.resources),
        "components": [instance_json(i) for i in w.instances],
        "gangs": [{"name": g.name, "members": [{"component": c, "instance": i, "pods": p} for c, i, p in g.members],
                   "pods": g.pods, "minMember": g.min_member, "gpus": g.gpus,
                   **({"window": g.window} if g.window is not None else {}),
                   **({"topology": [_request_json(r) for r in g.topology]} if g.topology else {})} for g in w.gangs],
    }
    peak = w.at_once()
    if peak is not w:                 # gangs start in windows: what must fit at the same time
        out["atOnce"] = {"pods": peak.pods, "gpus": peak.gpus, "resources": resources_json(peak.resources)}
    if w.source:
        out["source"] = w.source
    out.update(served or {})
    if pods_by_component is not None:
        out["podsByComponent"] = {k: [dict(p) for p in v] for k, v in pods_by_component.items()}
    return out


def served_by(served: CompiledDefinition | None, w: Workload) -> dict[str, Any]:
    """`definitionFormat`, `definitionSource` (and `warnings`) for a workload, from the
    definition its catalog holds for the kind; a definition of that name not in the catalog
    was registered in a cluster (placer's own format)."""
    if served is None or served.name != w.definition:
        return {"definitionFormat": PLACER_FORMAT, "definitionSource": "cluster"}
    out: dict[str, Any] = {"definitionFormat": served.format, "definitionSource": served.source}
    warnings = definition_warnings(served, w.obj) if w.obj is not None else []
    if warnings:
        out["warnings"] = warnings
    return out


def _request_json(r: TopologyRequest) -> dict[str, Any]:
    out: dict[str, Any] = {"key": r.key, "required": r.required}
    if r.components is not None:
        out["components"] = sorted(r.components)
    return out


def request_text(r: TopologyRequest) -> str:
    """`example.com/rack required` (`... for replicatedJob/eval` when it covers a pod set)."""
    where = f" for {', '.join(sorted(r.components))}" if r.components is not None else ""
    return f"{r.key} {'required' if r.required else 'preferred'}{where}"


def _requests_text(requests: Mapping[str, int]) -> str:
    return ", ".join(f"{k}={format_quantity(k, v)}" for k, v in sorted(requests.items())) or "none"


def workload_tree(w: Workload, pods_by_component: Mapping[str, Sequence[Mapping[str, Any]]] | None = None) -> Tree:
    phase = f"{w.phase.value}" + (f" ({w.reason}{': ' + w.message if w.message else ''})" if w.reason else "")
    root = Tree(f"[bold]{w.kind} {w.key}[/]  [dim]{w.definition}[/]  pods={w.pods} gpus={w.gpus}  "
                f"phase={phase}" + ("  [yellow]suspended[/]" if w.suspended else ""))
    components: dict[str, Tree] = {}
    for inst in w.instances:
        comp = components.get(inst.component) or root.add(f"[cyan]{inst.component}[/]")
        components[inst.component] = comp
        node = comp.add(f"{inst.instance}: {inst.replicas} x {inst.pods_per_replica} = {plural(inst.pods, 'pod')}, "
                        f"per pod {_requests_text(inst.pod.requests)}, gpus={inst.gpus}")
        for pod in (pods_by_component or {}).get(inst.key, ()):
            node.add(f"{pod.get('name')}  node={pod.get('node') or '-'}  {pod.get('phase') or ''}")
    if w.gangs:
        gangs = root.add("[magenta]gangs[/]")
        for g in w.gangs:
            members = ", ".join(f"{c}/{i}:{p}" for c, i, p in g.members)
            window = f" window={g.window}" if g.window is not None else ""
            topology = f" topology: {escape('; '.join(request_text(r) for r in g.topology))}" if g.topology else ""
            gangs.add(f"{g.name}: minMember={g.min_member} of {plural(g.pods, 'pod')}, gpus={g.gpus}{window} "
                      f"{escape('[' + members + ']')}{topology}")
        peak = w.at_once()
        if peak is not w:
            root.add(f"[magenta]at once[/]: {plural(peak.pods, 'pod')}, gpus={peak.gpus} (the largest startup window)")
    return root
