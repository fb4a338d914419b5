"""A Karta as a placer definition document: the same `Workload` comes out of it as out of
placer's own definitions, with Workload Map's semantics kept.

Karta paths run over the whole object and yield streams zipped by position with
`instanceIdPath`. Each component's streams are gathered once per object into a `let`
(`karta_rows_N`: one row per instance); placer's component then walks the row numbers
(`getpath(["karta instance", n])`, a path expression, so `$key` is the row number) and
reads its fields from the row. Template paths are kept as paths too (computed in the write
expressions only, so interpretation never pays for them), so that pod-template patching
writes through the Karta's own paths.
"""

from __future__ import annotations

import json
import re
from typing import Any

from placer.definitions.karta.gangs import gangs_expression
from placer.definitions.karta.schema import STATUS_ORDER, Component, Karta, Matcher, StatusDefinition
from placer.definitions.karta.tree import FRAGMENT_FORM, SPEC_FORM, TEMPLATE_FORM, Tree, columns, form, form_paths

# Workload Map's normalized statuses on placer's phases; the Karta status stays the reason
PHASES = {"initializing": "Initializing", "running": "Running", "completed": "Completed", "failed": "Failed",
          "degraded": "Running", "suspended": "Pending", "suspending": "Running", "resuming": "Initializing"}
_NUM = "(if type == \"string\" then tonumber else . end)"   # numeric strings are accepted
CONDS = "karta_conds"


def translate(karta: Karta) -> dict[str, Any]:
    """The placer definition document (schema of `placer.definitions.schema`) for `karta`."""
    tree = Tree(karta)
    root = karta.root
    lets: dict[str, str] = {}
    components = []
    for n, comp in enumerate(tree.pod_components):
        lets[f"karta_rows_{n}"] = rows_expression(karta.metadata.name, comp)
        components.append(component(n, comp))
    status = root.statusDefinition
    if status and status.conditionsDefinition:
        lets[CONDS] = conditions_expression(status)
    doc: dict[str, Any] = {
        "name": karta.metadata.name,
        "description": f"Workload Map definition {karta.metadata.name} ({karta.apiVersion} Karta)",
        "matches": [{"apiVersion": root.kind.api_version, "kind": root.kind.kind}] if root.kind else [],
        "let": lets, "components": components,
        "status": {"rules": status_rules(status) if status else []},
    }
    gangs = gangs_expression(tree)
    if gangs:
        doc["gangs"] = gangs
    suspend = suspend_path(root)
    if suspend:
        doc["suspend"] = {"path": suspend}
    scale = scale_of(root)
    if scale:
        doc["scale"] = scale
    return doc


_PLAIN_PATH = re.compile(r'(\.[A-Za-z_][A-Za-z0-9_]*|\["[^"]*"\])+')


def scale_of(root: Component) -> dict[str, Any] | None:
    """The root's `scaleDefinition` as placer's `scale` (placer.dev/spread: divide), where it
    applies: a serving root (no `completed` status: it does not run to completion) that makes the
    pods itself (a pod spec of its own), whose replicasPath is a plain path, optionally with a
    `// N` default (`.spec.replicas // 1`)."""
    path = root.scaleDefinition.replicasPath if root.scaleDefinition else None
    status = root.statusDefinition
    batch = bool(status and status.statusMappings and status.statusMappings.completed)
    if not root.has_pods or not path or batch:
        return None
    m = re.fullmatch(r"\s*(\S+?)\s*(?://\s*([0-9]+))?\s*", path)
    if not m or not _PLAIN_PATH.fullmatch(m[1]):
        return None
    return {"replicas": m[1], "default": int(m[2] or 1), "unit": "replica"}


def rows_expression(definition: str, comp: Component) -> str:
    """One row per instance: [id, replicas, min, max, pod-spec parts...], each stream
    zipped with the ids by position; a stream of another length is an error."""
    scale = comp.scaleDefinition
    paths = form_paths(comp)
    streams = {"replicas": scale.replicasPath if scale else None, "min": scale.minReplicasPath if scale else None,
               "max": scale.maxReplicasPath if scale else None, **{k: paths[k] for k in form(comp)}}
    where = f"karta {definition}: component {comp.name}"
    if comp.instanceIdPath:
        ids = (f'[({comp.instanceIdPath}) | if . == null or . == "" then error("{where}: instanceIdPath '
               f'yields an empty id") else tostring end]')
    else:
        ids = '["0"]'                          # one instance; placer's single-instance id
    out = f"{ids} as $karta_ids | ($karta_ids | length) as $karta_n"
    cells = ["$karta_ids[$n]"]
    for k, (name, expr) in enumerate(streams.items()):
        if expr is None:
            cells.append("null")
            continue
        out += (f" | [({expr})] as $karta_v{k} | if ($karta_v{k} | length) != $karta_n then "
                f'error("{where}: {_field(name)} yields \\($karta_v{k} | length) values for \\($karta_n) '
                f'instance ids") else . end')
        cells.append(f"$karta_v{k}[$n]")
    return f"{out} | [range(0; $karta_n) as $n | [{', '.join(cells)}]]"


def _field(name: str) -> str:
    return {"replicas": "scaleDefinition.replicasPath", "min": "scaleDefinition.minReplicasPath",
            "max": "scaleDefinition.maxReplicasPath", "template": "specDefinition.podTemplateSpecPath",
            "spec": "specDefinition.podSpecPath", "metadata": "specDefinition.metadataPath"
            }.get(name, f"specDefinition.fragmentedPodSpecDefinition.{name}")


def paths_expression(comp: Component) -> str:
    """Per writable part of the pod spec, the absolute path of each instance's value (null
    when the Karta's expression is no path expression: it reads but cannot be written)."""
    paths = form_paths(comp)
    parts = {"template": paths["template"], "spec": paths["spec"], "metadata": paths["metadata"],
             "labels": paths["labelsPath"], "annotations": paths["annotationsPath"],
             "schedulerName": paths["schedulerNamePath"]}
    entries = ", ".join(f"{json.dumps(k)}: (try [path({v})] catch null)" for k, v in parts.items() if v)
    return "{" + entries + "}"


# patch key -> (part whose path it extends, suffix), per pod-spec form
_WRITES: dict[tuple[str, ...], dict[str, tuple[str, list[str]]]] = {
    TEMPLATE_FORM: {"labels": ("template", ["metadata", "labels"]),
                     "annotations": ("template", ["metadata", "annotations"]),
                     "nodeSelector": ("template", ["spec", "nodeSelector"]),
                     "tolerations": ("template", ["spec", "tolerations"]),
                     "schedulerName": ("template", ["spec", "schedulerName"])},
    SPEC_FORM: {"labels": ("metadata", ["labels"]), "annotations": ("metadata", ["annotations"]),
                 "nodeSelector": ("spec", ["nodeSelector"]), "tolerations": ("spec", ["tolerations"]),
                 "schedulerName": ("spec", ["schedulerName"])},
    FRAGMENT_FORM: {"labels": ("labels", []), "annotations": ("annotations", []),
                     "schedulerName": ("schedulerName", [])},
}
_SOURCE = {"template": "template", "spec": "spec", "metadata": "metadata", "labels": "labelsPath",
           "annotations": "annotationsPath", "schedulerName": "schedulerNamePath"}


def component(n: int, comp: Component) -> dict[str, Any]:
    row, col = f"$karta_rows_{n}[$key]", columns(comp)
    out: dict[str, Any] = {
        "name": comp.name,
        "instances": f'range(0; $karta_rows_{n} | length) as $karta_i | getpath(["karta instance", $karta_i])',
        "instanceId": f"{row}[0]", "replicas": f"({row}[1] // 1 | {_NUM})",
        "minReplicas": f"({row}[2] | {_NUM})", "maxReplicas": f"({row}[3] | {_NUM})",
    }
    shape = form(comp)
    fields: dict[str, Any] = {}
    if shape == TEMPLATE_FORM:
        pod: dict[str, Any] = {"template": f"{row}[{col['template']}]"}
    elif shape == SPEC_FORM:
        pod = {"spec": f"{row}[{col['spec']}]"}
        if comp.specDefinition and comp.specDefinition.metadataPath:
            pod["metadata"] = f"{row}[{col['metadata']}]"
    else:
        pod, fields = {}, fragment_fields(row, col)
    paths = form_paths(comp)
    for key, (part, suffix) in _WRITES[shape].items():
        if paths.get(_SOURCE[part]):
            write = (f'getpath(((((($root | {paths_expression(comp)}).{part}) // [])[$key]) // error("not a path"))'
                     f' + {json.dumps(suffix)})')
            fields[key] = {"read": fields.get(key, "null"), "write": write, "writeFrom": "object"}
    if fields:
        pod["fields"] = fields
    out["pod"] = pod
    return out


def fragment_fields(row: str, col: dict[str, int]) -> dict[str, Any]:
    """A fragmented pod spec as placer's pod fields. A CR-level `resources` counts only
    when no container declares any (as `kli` counts)."""
    containers = (f"(({row}[{col['containersPath']}]) // (if {row}[{col['containerPath']}] == null then null "
                  f"else [{row}[{col['containerPath']}]] end))")
    declared = (f"([{containers}[]? | .resources // {{}} | ((.requests // {{}}) + (.limits // {{}})) | length]"
                " | add // 0)")
    return {
        "containers": containers,
        "resources": f"(if {declared} > 0 then null else {row}[{col['resourcesPath']}] end)",
        "labels": f"{row}[{col['labelsPath']}]", "annotations": f"{row}[{col['annotationsPath']}]",
        "schedulerName": f"{row}[{col['schedulerNamePath']}]",
        "priorityClassName": f"{row}[{col['priorityClassNamePath']}]",
        "affinity": (f"({{nodeAffinity: {row}[{col['nodeAffinityPath']}],"
                     f" podAffinity: {row}[{col['podAffinityPath']}]}}"
                     " | with_entries(select(.value != null)) | if length == 0 then null else . end)"),
    }


def conditions_expression(status: StatusDefinition) -> str:
    """The last condition of each type, by the definition's own field names."""
    cd = status.conditionsDefinition
    assert cd is not None
    t = json.dumps(cd.typeFieldName)
    return (f"reduce ((({cd.path}) // []) | .[]? | select(type == \"object\" and (.[{t}] | type) == \"string\"))"
            f" as $x ({{}}; . + {{($x[{t}]): $x}})")


def status_rules(status: StatusDefinition) -> list[dict[str, Any]]:
    """One placer rule per matcher, in the library's order of precedence (the first
    matching status wins); the reason is the Karta status."""
    rules = []
    for name in STATUS_ORDER:
        for matcher in getattr(status.statusMappings, name):
            rules.append({"phase": PHASES[name], "when": matcher_expression(status, matcher),
                          "reason": json.dumps(name.capitalize()), "message": _message(status, matcher)})
    return rules


def matcher_expression(status: StatusDefinition, m: Matcher) -> str:
    parts = []
    if m.byPhase is not None:
        path = status.phaseDefinition.path if status.phaseDefinition else "null"
        parts.append(f"(([({path})] | .[0]) == {json.dumps(m.byPhase)})")
    cd = status.conditionsDefinition
    for c in m.byConditions or ():
        if cd is None:
            parts.append("false")
            continue
        test = f"(${CONDS}[{json.dumps(c.type)}] as $x | $x != null"
        if c.status is not None:
            test += f" and ($x[{json.dumps(cd.statusFieldName)}] | tostring) == {json.dumps(c.status)}"
        if c.reason is not None:
            test += f" and ($x[{json.dumps(cd.reasonFieldName)}] | tostring) == {json.dumps(c.reason)}"
        parts.append(test + ")")
    if m.byExpression is not None:
        expected = json.dumps(m.byExpression.expectedResult)
        parts.append(f"(([({m.byExpression.expression}) | tostring] | .[0]) == {expected})")
    return " and ".join(parts) or "false"


def _message(status: StatusDefinition, m: Matcher) -> str:
    cd = status.conditionsDefinition
    if cd is None or not m.byConditions:
        return "null"
    return f"(${CONDS}[{json.dumps(m.byConditions[0].type)}][{json.dumps(cd.messageFieldName)}] // null)"


def suspend_path(root: Component) -> str | None:
    """placer's suspend field: the first suspend action writing `true`."""
    for action in (root.suspendDefinition.suspendActions if root.suspendDefinition else ()):
        try:
            if json.loads(action.value) is True:
                return action.path
        except ValueError:
            continue
    return None
