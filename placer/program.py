"""Fuse a definition's jq expressions into one compiled program.

Evaluating one program per object is several times faster than one call per expression
(each jq call re-serialises the whole object). When the fused program fails, `diagnose`
replays the expressions one by one to name the field and expression that broke.
"""

from __future__ import annotations

import json
from typing import Any

import jq

from .definitions import Component, Definition, FieldExpr, PodFields, StatusRule
from .errors import DefinitionError, EvaluationError

POD_FIELDS = tuple(PodFields.model_fields)
PATCHABLE = ("labels", "annotations", "nodeSelector", "tolerations", "schedulerName")
NOT_A_PATH = "<not a path expression>"

_DEFAULT_ID = '(if $key == null then "0" else ($key | tostring) end)'

# pods = clamp(replicas, min, max) x podsPerReplica, in jq so the gang expression sees it
_PODS = ("((.replicas) as $r | (if .min != null and $r < .min then .min else $r end) as $r"
         " | (if .max != null and $r > .max then .max else $r end) as $r | $r * .ppr)")


def _read(f: str | FieldExpr | None) -> str | None:
    return f.read if isinstance(f, FieldExpr) else f


def _write(f: str | FieldExpr | None) -> str | None:
    return (f.write or None) if isinstance(f, FieldExpr) else f


# Project pod templates onto what scheduling reads, so jq hands back little JSON
# (commands, env and volumes are most of a template and none of its demand).
_PROJECT = (
    'def _ctrs: if type == "array" then [.[] | if type == "object" then {name, resources, restartPolicy}'
    ' else . end] else . end;'
    ' def _spec: if type == "object" then {containers: (.containers | _ctrs),'
    ' initContainers: (.initContainers | _ctrs), nodeSelector, tolerations, schedulerName,'
    ' priorityClassName, overhead, affinity: (if (.affinity | type) == "object" and'
    ' (.affinity.nodeAffinity | type) == "object" then {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution:'
    ' .affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution}} else null end)} else . end;'
    ' def _meta: if type == "object" then {labels, annotations} else . end;'
    ' def _tpl: if type == "object" then {metadata: (.metadata | _meta), spec: (.spec | _spec)} else . end; ')
_PROJECTIONS = {"tpl": "_tpl", "spec": "_spec", "meta": "_meta",
                "f.containers": "_ctrs", "f.initContainers": "_ctrs"}


def component_fields(comp: Component) -> dict[str, tuple[str, str]]:
    """key in the program's output -> (field path in the definition, jq expression)."""
    pod = comp.pod
    fields = {
        "id": ("instanceId", comp.instanceId or _DEFAULT_ID),
        "replicas": ("replicas", comp.replicas or "1"),
        "min": ("minReplicas", comp.minReplicas or "null"),
        "max": ("maxReplicas", comp.maxReplicas or "null"),
        "ppr": ("podsPerReplica", comp.podsPerReplica or "1"),
        "sel": ("podSelector", comp.podSelector or "{}"),
        "tpl": ("pod.template", pod.template or "null"),
        "spec": ("pod.spec", pod.spec or "null"),
        "meta": ("pod.metadata", pod.metadata or "null"),
    }
    if pod.fields:
        for name in POD_FIELDS:
            expr = _read(getattr(pod.fields, name))
            if expr:
                fields[f"f.{name}"] = (f"pod.fields.{name}", expr)
    return fields


def _obj(fields: dict[str, tuple[str, str]]) -> str:
    def value(k: str, expr: str) -> str:
        return f"(({expr}) | {_PROJECTIONS[k]})" if k in _PROJECTIONS else f"({expr})"
    return "{" + ", ".join(f"{json.dumps(k)}: {value(k, expr)}" for k, (_, expr) in fields.items()) + "}"


def _instances(comp: Component) -> str:
    return comp.instances or "."


def _rule(rule: StatusRule) -> str:
    out = (f'{{phase: {json.dumps(rule.phase)}, reason: (({rule.reason or "null"}) // $c.reason // ""),'
           f' message: (({rule.message or "null"}) // $c.message // "")}}')
    if rule.condition:
        return (f'(((.status.conditions // []) | map(select(.type == {json.dumps(rule.condition)})) | last)'
                f' as $c | if $c != null and $c.status == {json.dumps(rule.conditionStatus)}'
                f' then {out} else empty end)')
    return f"(null as $c | if ({rule.when}) then {out} else empty end)"


_NO_STATUS = ('(if ((.status // {}) | length) == 0 then {phase: "Pending", reason: "NotStarted",'
              ' message: "no status reported yet"} else empty end)')
_UNKNOWN = '{phase: "Unknown", reason: "", message: "no status rule matched"}'


def build_program(defn: Definition) -> str:
    comps = []
    rows = []
    for i, comp in enumerate(defn.components):
        comps.append(f'"c{i}": [path({_instances(comp)}) as $p'
                     f' | ($p | if length > 0 then .[-1] else null end) as $key'
                     f' | $root | getpath($p) | {_obj(component_fields(comp))}]')
        rows.append(f'($c.c{i}[] | {{component: {json.dumps(comp.name)}, instance: .id,'
                    f' replicas: .replicas, podsPerReplica: .ppr, pods: {_PODS}}})')
    status = "first(" + ", ".join([*(_rule(r) for r in defn.status.rules), _NO_STATUS, _UNKNOWN]) + ")"
    suspended = f"(({defn.suspend.path}) // false)" if defn.suspend else "null"
    gangs = defn.gangs or "[]"
    return (_PROJECT + ". as $root | {" + ", ".join(comps) + "} as $c"
            f" | [{', '.join(rows)}] as $instances"
            f" | {{components: $c, instances: $instances, status: {status},"
            f" suspended: {suspended}, gangs: ({gangs})}}")


def build_paths_program(defn: Definition) -> str:
    """Absolute paths of every instance's pod template parts, for mutation."""
    comps = []
    for i, comp in enumerate(defn.components):
        pod = comp.pod
        parts = {"template": pod.template, "spec": pod.spec, "metadata": pod.metadata}
        if pod.fields:
            parts.update({f"f.{n}": _write(getattr(pod.fields, n)) for n in PATCHABLE})
        # a field whose expression is no path expression can be read but not written:
        # mark it, and fail only if a patch needs it
        entries = ", ".join(f'{json.dumps(k)}: (try ([path({v})] | first // null) catch "{NOT_A_PATH}")'
                            for k, v in parts.items() if v)
        comps.append(f'[path({_instances(comp)}) as $p | ($p | if length > 0 then .[-1] else null end) as $key'
                     f' | $root | getpath($p) | {{base: $p, {entries}}}]' if entries else "[]")
    return ". as $root | [" + ", ".join(comps) + "]"


def compile_program(text: str, name: str) -> Any:
    try:
        return jq.compile(text)
    except ValueError as e:  # a bug in fusing, or expressions that only clash when fused
        raise DefinitionError(f"definition {name}: fused program does not compile: {e}") from None


def _eval(expr: str, value: Any, **args: Any) -> Any:
    return jq.compile(expr, args={"root": None, "key": None, "instances": None, **args}).input_value(value).all()


def diagnose(defn: Definition, obj: Any, error: str, objname: str | None) -> EvaluationError:
    """Find the first expression of `defn` that fails on `obj` (slow path, errors only)."""
    def fail(field: str, expr: str, msg: str) -> EvaluationError:
        return EvaluationError(msg.split("\n")[0], definition=defn.name, field=field, expression=expr, obj=objname)

    for i, comp in enumerate(defn.components):
        inst = _instances(comp)
        try:
            paths = _eval(f"[path({inst})]", obj, root=obj)[0]
        except ValueError as e:
            return fail(f"components[{i}].instances", inst, str(e))
        for p in paths:
            key = p[-1] if p else None
            element = _getpath(obj, p)
            for field, expr in component_fields(comp).values():
                try:
                    _eval(expr, element, root=obj, key=key)
                except ValueError as e:
                    return fail(f"components[{i}].{field}", expr, str(e))
    for j, rule in enumerate(defn.status.rules):
        for field in ("when", "reason", "message"):
            expr = getattr(rule, field)
            if expr:
                try:
                    _eval(expr, obj, root=obj)
                except ValueError as e:
                    return fail(f"status.rules[{j}].{field}", expr, str(e))
    for field, expr in (("suspend.path", defn.suspend.path if defn.suspend else None), ("gangs", defn.gangs)):
        if expr:
            try:
                _eval(expr, obj, root=obj, instances=[])
            except ValueError as e:
                return fail(field, expr, str(e))
    return EvaluationError(error.split("\n")[0], definition=defn.name, field="<program>",
                           expression="(fused program)", obj=objname)


def _getpath(obj: Any, path: list[Any]) -> Any:
    for part in path:
        if obj is None:
            return None
        obj = obj[part] if isinstance(obj, list) and isinstance(part, int) else (obj or {}).get(part)
    return obj
