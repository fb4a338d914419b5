"""placer's own definitions written as `run.ai/v1alpha1` Kartas (NVIDIA Workload Map).

Each placer component becomes a child of one root component (the workload kind). Karta
paths run over the whole object and yield streams zipped by position, so every exported
path walks the component's instances itself (`path(instances) as $path | getpath($path)`),
binds what placer binds (`$root`, `$key`, `$path`, the `let`s it uses) and yields exactly
one value per instance. What Karta cannot say is approximated in the closest form and
listed, one line each, in `Export.approximations` (the comment at the top of the file).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from placer.definitions.karta.schema import API_VERSION, KIND
from placer.definitions.spec import Component, Definition, FieldExpr, Match, PodFields, StatusRule

# placer phase -> the Workload Map status that reads back as it (translate.PHASES)
STATUS_OF = {"Running": "running", "Completed": "completed", "Failed": "failed",
             "Initializing": "initializing", "Pending": "suspended"}
_KEY = "($path | if length > 0 then .[-1] else null end)"
_CONDS = ('(reduce ((.status.conditions // []) | .[]? | select(type == "object" and (.type | type) == "string"))'
          ' as $x ({}; . + {($x.type): $x}))')
# placer pod field -> Karta fragmented pod-spec path
_FRAGMENTS = {"containers": "containersPath", "resources": "resourcesPath", "labels": "labelsPath",
              "annotations": "annotationsPath", "schedulerName": "schedulerNamePath",
              "priorityClassName": "priorityClassNamePath"}


@dataclass(frozen=True)
class Export:
    name: str                                 # the Karta's metadata.name
    document: dict[str, Any]                  # the Karta
    approximations: tuple[str, ...]           # what placer's definition says that the Karta cannot


def export_definition(defn: Definition) -> list[Export]:
    """One Karta per kind the definition matches."""
    many = len(defn.matches) > 1
    return [_export(defn, m, f"{defn.name}-{m.kind.lower()}-{m.apiVersion.rpartition('/')[2]}" if many
                    else defn.name) for m in defn.matches]


def _export(defn: Definition, match: Match, name: str) -> Export:
    notes: list[str] = []
    group, _, version = match.apiVersion.rpartition("/")
    taken = {c.name for c in defn.components}
    root_name = next(n for n in (match.kind.lower(), "workload", "root") if n not in taken)
    root: dict[str, Any] = {"name": root_name, "kind": {"group": group, "version": version, "kind": match.kind},
                            "statusDefinition": status_definition(defn, notes)}
    if defn.suspend:
        path = _with_context(defn, defn.suspend.path, object_level=True)
        root["suspendDefinition"] = {"suspendActions": [{"path": path, "value": "true"}],
                                     "resumeActions": [{"path": path, "value": "false"}]}
    children = [child(defn, comp, root_name, notes) for comp in defn.components]
    spec: dict[str, Any] = {"structureDefinition": {"rootComponent": root, "childComponents": children}}
    if defn.gangs:
        spec["optimizationInstructions"] = {"gangScheduling": {"podGroup": {
            "name": defn.name, "subGroups": [{"componentName": c.name} for c in defn.components]}}}
        notes.append("gangs: placer's gang expression (per-replica gangs, startup stages, minMember rules, "
                     "conditions) is approximated as one podGroup per workload, each component a subgroup "
                     "of its pods (minReplicas when set)")
    if defn.gangPodLabel:
        notes.append(f"gangPodLabel {defn.gangPodLabel}: no Karta field (topology hand-offs per gang)")
    doc = {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": name}, "spec": spec}
    return Export(name, doc, tuple(dict.fromkeys(notes)))


def _used_lets(defn: Definition, expr: str) -> dict[str, str]:
    """The lets `expr` uses, with the lets those use, in the definition's order."""
    need: set[str] = set()
    todo = [expr]
    while todo:
        text = todo.pop()
        for name, body in defn.let.items():
            if name not in need and re.search(rf"\${name}\b", text):
                need.add(name)
                todo.append(body)
    return {n: e for n, e in defn.let.items() if n in need}


def _lets(defn: Definition, expr: str) -> str:
    return "".join(f"(({e}\n)) as ${n} | " for n, e in _used_lets(defn, expr).items())


def _with_context(defn: Definition, expr: str, object_level: bool = False) -> str:
    """An expression over the object, with `$root` and the lets it uses bound; as is when
    it needs neither (so a plain path stays a plain path)."""
    lets = _lets(defn, expr)
    if not lets and "$root" not in expr:
        return expr.strip()
    return f". as $root | {lets}({expr}\n)"


def _per_instance(defn: Definition, comp: Component, body: str) -> str:
    """`body` (over one instance, `$key`, `$path`, `$root`, lets) once per instance, as a
    stream over the whole object."""
    lets = _lets(defn, body + "\n" + (comp.instances or ""))
    head = ". as $root | " if "$root" in body or lets else ""
    if comp.instances is None and "$key" not in body and "$path" not in body:
        return f"{head}{lets}{body}" if (head or lets) else body
    if comp.instances is None:
        return f"{head}{lets}[] as $path | null as $key | {body}"
    walk = f"path(({comp.instances}\n)) as $path | {_KEY} as $key | getpath($path)"
    return f"{head or '. as $root | '}{lets}{walk} | {body}"


def _one(expr: str) -> str:
    """Exactly one value (null when the expression yields none)."""
    return f"([({expr}\n)] | .[0])"


def child(defn: Definition, comp: Component, root: str, notes: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": comp.name, "ownerRef": root}
    if comp.instances is not None or comp.instanceId is not None:
        ident = comp.instanceId or '(if $key == null then "0" else ($key | tostring) end)'
        out["instanceIdPath"] = _per_instance(defn, comp, f"({_one(ident)} | tostring)")
    out["specDefinition"] = spec_definition(defn, comp, notes)
    scale = scale_definition(defn, comp)
    if comp.podsPerReplica is not None:
        notes.append(f"component {comp.name}: podsPerReplica has no Karta field: replicasPath, "
                     "minReplicasPath and maxReplicasPath are multiplied by it")
    if scale:
        out["scaleDefinition"] = scale
    if comp.podSelector is not None:
        notes.append(f"component {comp.name}: podSelector (computed labels) has no Karta form: not exported")
    return out


def scale_definition(defn: Definition, comp: Component) -> dict[str, str]:
    bind = f"({_one(comp.podsPerReplica)} // 1) as $karta_p | " if comp.podsPerReplica else ""
    ppr = " * $karta_p" if comp.podsPerReplica else ""
    out: dict[str, str] = {}
    if comp.replicas is not None or ppr:
        out["replicasPath"] = _per_instance(defn, comp, f"{bind}(({_one(comp.replicas or '1')} // 1){ppr})")
    for field, expr in (("minReplicasPath", comp.minReplicas), ("maxReplicasPath", comp.maxReplicas)):
        if expr is not None:
            out[field] = _per_instance(defn, comp, f"{bind}({_one(expr)} | if . == null then null else .{ppr} end)")
    return out


def spec_definition(defn: Definition, comp: Component, notes: list[str]) -> dict[str, Any]:
    pod = comp.pod
    fields = {k: v for k, v in (pod.fields or PodFields()).items() if v is not None}
    if not (pod.template or pod.spec):
        return {"fragmentedPodSpecDefinition": fragments(defn, comp, fields, notes)}
    if fields:
        notes.append(f"component {comp.name}: pod fields over the template ({', '.join(fields)}) have no Karta "
                     "form: the template path reads the template with them applied, and cannot be assigned through")
    binds = "".join(f"{_one(_read(v))} as $karta_f_{k} | " for k, v in fields.items())
    spec_fields = [k for k in fields if k not in ("labels", "annotations", "resources", "mainContainer")]
    on_spec = "".join(f" | if $karta_f_{k} != null then .{k} = $karta_f_{k} else . end" for k in spec_fields)
    if "resources" in fields:
        main = "$karta_f_mainContainer" if "mainContainer" in fields else "null"
        on_spec += (f" | .containers = ((.containers // null) as $karta_cs | $karta_f_resources as $karta_res"
                    f" | {main} as $karta_m | {_MERGED})")
    on_meta = "".join(f" | if $karta_f_{k} != null then .{k} = $karta_f_{k} else . end"
                      for k in ("labels", "annotations") if k in fields)
    if pod.template:
        body = f"first(({pod.template}\n))"
        if fields:
            body = f"{binds}{body} | .spec = ((.spec // {{}}){on_spec}) | .metadata = ((.metadata // {{}}){on_meta})"
        return {"podTemplateSpecPath": _per_instance(defn, comp, body)}
    spec = f"first(({pod.spec}\n))"
    out = {"podSpecPath": _per_instance(defn, comp, f"{binds}({spec} // {{}}){on_spec}" if fields else spec)}
    if pod.metadata or on_meta:
        meta = f"first(({pod.metadata}\n))" if pod.metadata else "null"
        out["metadataPath"] = _per_instance(defn, comp, f"{binds}({meta} // {{}}){on_meta}" if on_meta else meta)
    return out


def _read(value: str | FieldExpr) -> str:
    return value.read if isinstance(value, FieldExpr) else value


_MERGE = ("[\"requests\", \"limits\"] as $karta_parts | (.resources // {}) as $old | .resources = ($old + "
          "(reduce $karta_parts[] as $p ({}; .[$p] = (($old[$p] // {}) + (($karta_res[$p] // {}) "
          "| with_entries(select(.value != null)))))))")


def fragments(defn: Definition, comp: Component, fields: dict[str, Any], notes: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name, value in fields.items():
        read = _read(value)
        # first(...): one value, as placer requires, and still a path where the field is one
        if name in _FRAGMENTS and name not in ("containers", "resources"):
            out[_FRAGMENTS[name]] = _per_instance(defn, comp, f"first(({read}\n))")
        elif name == "affinity":
            for part in ("nodeAffinity", "podAffinity"):
                out[f"{part}Path"] = _per_instance(defn, comp, f"first(({read}\n)) | .{part}")
        elif name not in ("containers", "resources", "mainContainer"):
            notes.append(f"component {comp.name}: pod field {name} has no place in a fragmented Karta pod spec: "
                         "not exported")
    out["containersPath"] = _per_instance(defn, comp, containers(fields))
    if "resources" in fields:
        notes.append(f"component {comp.name}: placer's resources of the main container are merged into that "
                     "container in containersPath (a Karta's CR-level resources count only when no container "
                     "declares any), so containersPath reads but cannot be assigned through")
    return out


def containers(fields: dict[str, Any]) -> str:
    """The containers, with placer's `resources` merged over the main container's (as
    placer's pods.py does), or made the only container."""
    cs = _one(_read(fields["containers"])) if "containers" in fields else "null"
    if "resources" not in fields:
        return cs
    main = _one(fields["mainContainer"]) if "mainContainer" in fields else "null"
    return (f"{cs} as $karta_cs | {_one(_read(fields['resources']))} as $karta_res | {main} as $karta_m"
            f" | {_MERGED}")


_MERGED = ("if $karta_res == null then $karta_cs"
           ' elif ($karta_cs // []) | length == 0 then [{name: ($karta_m // "main"), resources: $karta_res}]'
           " else $karta_cs | (first(range(0; length) as $k | select(.[$k].name == $karta_m) | $k) // 0) as $i"
           f" | .[$i] |= ({_MERGE}) end")


def status_definition(defn: Definition, notes: list[str]) -> dict[str, Any]:
    """placer's first-matching rule, as one expression naming the phase; each status the
    rules use matches when it names that status's phase."""
    rules = defn.status.rules
    if not rules:
        return {"statusMappings": {}}
    tests = ", ".join(_rule(r) for r in rules)
    text = " ".join((r.when or "") + (r.reason or "") + (r.message or "") for r in rules)
    conds = f"{_CONDS} as $conds | " if any(r.condition or "$conds" in (r.when or "") for r in rules) else ""
    expression = f". as $root | {_lets(defn, text)}{conds}first({tests}, \"None\")"
    mappings: dict[str, list[dict[str, Any]]] = {}
    for phase in dict.fromkeys(r.phase for r in rules):
        mappings.setdefault(STATUS_OF[phase], []).append(
            {"byExpression": {"expression": expression, "expectedResult": phase}})
    notes.append("status: placer's first-matching rules are one expression per status; the reasons and "
                 "messages of the rules are not exported (a Karta status is its own reason)")
    if "Pending" in (r.phase for r in rules):
        notes.append("status: placer's Pending rules map to the Karta status suspended (read back as Pending)")
    return {"statusMappings": mappings}


def _rule(rule: StatusRule) -> str:
    phase = json.dumps(rule.phase)
    if rule.condition:
        return (f'($conds[{json.dumps(rule.condition)}] as $c | if $c != null and $c.status == '
                f'{json.dumps(rule.conditionStatus)} then {phase} else empty end)')
    return f"(null as $c | if (({rule.when}\n)) then {phase} else empty end)"


def header(export: Export, source: str) -> str:
    """The comment at the top of an exported file."""
    lines = [f"Workload Map (Karta) form of placer's definition {source}, written by "
             "`placer catalog export --format karta`."]
    if export.approximations:
        lines.append("Approximated (Karta cannot express these):")
        lines += [f"- {a}" for a in export.approximations]
    return "".join(f"# {line}\n" for line in lines)
