"""Fuse a definition's jq expressions into one compiled program.

Evaluating one program per object is several times faster than one call per expression
(each jq call re-serialises the whole object). jq builds objects slowly (about a
microsecond per key), so the program emits positional arrays holding only the fields the
definition sets; Python applies the defaults. When the fused program fails, `diagnose`
replays the expressions one by one to name the field and expression that broke.

Output of the fused program, per object:
    [rows of component 0, rows of component 1, ..., status, suspended, gangs]
where a row is `[id, <value of each field in Layout.keys order>]` and status is
`[phase, reason, message]`.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Callable

import jq

from placer.definitions.expressions import (
    COMPONENT_VARS,
    GANG_VARS,
    OBJECT_VARS,
    STATUS_VARS,
    check_expressions,
    expressions,
)
from placer.definitions.spec import POD_FIELDS, Component, Definition, FieldExpr, StatusRule
from placer.model.errors import DefinitionError, EvaluationError

PATCHABLE = ("labels", "annotations", "nodeSelector", "tolerations", "schedulerName")
NOT_A_PATH = "<not a path expression>"

_DEFAULT_ID = '(if $key == null then "0" else ($key | tostring) end)'
# output key -> (definition field, default applied in jq for $instances rows)
_COUNTS = {"replicas": ("replicas", "1"), "min": ("minReplicas", "null"),
           "max": ("maxReplicas", "null"), "ppr": ("podsPerReplica", "1")}


def _read(f: str | FieldExpr | None) -> str | None:
    return f.read if isinstance(f, FieldExpr) else f


def _write(f: str | FieldExpr | None) -> str | None:
    return (f.write or None) if isinstance(f, FieldExpr) else f


def component_fields(comp: Component) -> dict[str, tuple[str, str]]:
    """Output key -> (field path in the definition, jq expression), for the fields the
    component sets; `id` always comes first."""
    pod = comp.pod
    fields = {"id": ("instanceId", comp.instanceId or _DEFAULT_ID)}
    for key, (field, _) in _COUNTS.items():
        if getattr(comp, field):
            fields[key] = (field, getattr(comp, field))
    for key, field, expr in (("sel", "podSelector", comp.podSelector), ("tpl", "pod.template", pod.template),
                             ("spec", "pod.spec", pod.spec), ("meta", "pod.metadata", pod.metadata)):
        if expr:
            fields[key] = (field, expr)
    for name in POD_FIELDS if pod.fields else ():
        expr = _read(getattr(pod.fields, name))
        if expr:
            fields[f"f.{name}"] = (f"pod.fields.{name}", expr)
    return fields


@dataclass(frozen=True)
class Columns:
    """Column of each field in one component's rows (None: the definition does not set it,
    Python applies the default)."""

    width: int
    replicas: int | None
    min: int | None
    max: int | None
    ppr: int | None
    sel: int | None
    tpl: int | None
    spec: int | None
    meta: int | None
    fields: tuple[tuple[str, int], ...]       # pod field name -> column, for `pod.fields`
    pod: tuple[int, ...]                      # every column the pod's shape is read from

    @classmethod
    def of(cls, keys: tuple[str, ...]) -> "Columns":
        col = {k: n for n, k in enumerate(keys)}
        fields = tuple((k[2:], n) for k, n in col.items() if k.startswith("f."))
        pod = tuple(col[k] for k in ("tpl", "spec", "meta") if k in col) + tuple(n for _, n in fields)
        return cls(len(keys), col.get("replicas"), col.get("min"), col.get("max"), col.get("ppr"),
                   col.get("sel"), col.get("tpl"), col.get("spec"), col.get("meta"), fields, pod)


@dataclass(frozen=True)
class Layout:
    """Where each field sits in a component's rows."""

    keys: tuple[tuple[str, ...], ...]         # per component: output keys in row order
    columns: tuple[Columns, ...]              # the same, as column numbers per field


def layout(defn: Definition) -> Layout:
    keys = tuple(tuple(component_fields(c)) for c in defn.components)
    return Layout(keys, tuple(Columns.of(k) for k in keys))


# How the fused program writes an expression of the definition, given the variables it may
# use and whether it runs once per instance (`hot`): in place, parenthesised (`_inline`), or
# as a call of a function of its own (`_Calls`).
Ref = Callable[[str, tuple[str, ...], bool], str]


def _inline(expr: str, variables: tuple[str, ...], hot: bool = False) -> str:
    return f"({expr})"


def _instances(comp: Component) -> str:
    return comp.instances or "."


def _instances_ref(comp: Component, ref: Ref, variables: tuple[str, ...]) -> str:
    return ref(comp.instances, variables, False) if comp.instances and ref is not _inline else _instances(comp)


def _lets(defn: Definition, ref: Ref = _inline) -> str:
    out, lets = "", tuple[str, ...]()
    for name, expr in defn.let.items():
        out += f"{ref(expr, OBJECT_VARS + lets, False)} as ${name} | "
        lets += (name,)
    return out


def _rule(rule: StatusRule, ref: Ref = _inline, lets: tuple[str, ...] = ()) -> str:
    at = STATUS_VARS + lets
    reason = ref(rule.reason, at, False) if rule.reason else "(null)"
    message = ref(rule.message, at, False) if rule.message else "(null)"
    out = f'[{json.dumps(rule.phase)}, ({reason} // $c.reason), ({message} // $c.message)]'
    if rule.condition:
        return (f'($conds[{json.dumps(rule.condition)}] as $c | if $c != null and $c.status == '
                f'{json.dumps(rule.conditionStatus)} then {out} else empty end)')
    return f"(null as $c | if {ref(rule.when or 'null', at, False)} then {out} else empty end)"


# The last condition of each type, indexed once per object (training operators append).
_CONDS = ('(reduce ((.status.conditions // []) | .[]? | select(type == "object" and (.type | type) == "string"))'
          ' as $x ({}; . + {($x.type): $x})) as $conds | ')
_NO_STATUS = ('(if ((.status // {}) | length) == 0 then ["Pending", "NotStarted", "no status reported yet"]'
              ' else empty end)')
_UNKNOWN = '["Unknown", "", "no status rule matched"]'


def _uses_conds(rule: StatusRule) -> bool:
    return any("$conds" in (e or "") for e in (rule.when, rule.reason, rule.message))


def _gang_rows(defn: Definition, keys: Layout) -> str:
    """`$instances` for the gang expression, built only when it uses them."""
    rows = []
    for i, comp in enumerate(defn.components):
        cols = keys.columns[i]
        get = {k: default if getattr(cols, k) is None else f".[{getattr(cols, k)}]"
               for k, (_, default) in _COUNTS.items()}
        rows.append(f'($c[{i}][] | {{component: {json.dumps(comp.name)}, instance: .[0], replicas: {get["replicas"]},'
                    f' podsPerReplica: {get["ppr"]}, pods: (({get["replicas"]}) as $r | ({get["min"]}) as $lo'
                    f' | ({get["max"]}) as $hi | (if $lo != null and $r < $lo then $lo else $r end) as $r'
                    f' | (if $hi != null and $r > $hi then $hi else $r end) * {get["ppr"]})}})')
    return f"[{', '.join(rows)}] as $instances | "


def build_program(defn: Definition, ref: Ref = _inline) -> str:
    keys = layout(defn)
    lets = tuple(defn.let)
    comps = []
    for i, comp in enumerate(defn.components):
        fields = component_fields(comp).values()
        row = ", ".join(ref(expr, COMPONENT_VARS + lets, True) for _, expr in fields)
        instances = _instances_ref(comp, ref, OBJECT_VARS + lets)
        if any("$key" in expr or "$path" in expr for _, expr in fields):
            comps.append(f"[path({instances}) as $path | ($path | if length > 0 then .[-1] else null end)"
                         f" as $key | $root | getpath($path) | [{row}]]")
        else:       # path tracking costs jq several steps per instance: only when used
            comps.append(f"[{instances} | [{row}]]")
    rules = ", ".join([*(_rule(r, ref, lets) for r in defn.status.rules), _NO_STATUS, _UNKNOWN])
    conds = _CONDS if any(r.condition or _uses_conds(r) for r in defn.status.rules) else ""
    suspended = f"({ref(defn.suspend.path, OBJECT_VARS + lets, False)} // false)" if defn.suspend else "null"
    gangs = ref(defn.gangs, GANG_VARS + lets, False) if defn.gangs else "([])"
    instances = _gang_rows(defn, keys) if defn.gangs and "$instances" in defn.gangs else ""
    return (f". as $root | {_lets(defn, ref)}[{', '.join(comps)}] as $c | {instances}"
            f"$c + [({conds}first({rules})), {suspended}, {gangs}]")


class _Calls:
    """`Ref` writing each expression as a function defined before the program, whose
    parameters are the variables it uses among those it may: the function must parse on
    its own and may use no other variable, which is what `check_expressions` checks. A
    per-instance expression that uses variables stays in place too (jq binds a function's
    parameters on every call: 20-30% more time per object), its function only checked."""

    def __init__(self) -> None:
        self.defs: dict[tuple[str, tuple[str, ...]], int] = {}

    def __call__(self, expr: str, variables: tuple[str, ...], hot: bool = False) -> str:
        # the substring test first: the regex costs more, and most expressions use no variable
        used = tuple(v for v in variables if f"${v}" in expr and re.search(rf"\${v}\b", expr))
        n = self.defs.setdefault((expr, used), len(self.defs))
        if hot and used:
            return f"({expr})"
        return f"_pe{n}({'; '.join('$' + v for v in used)})" if used else f"_pe{n}"

    def head(self) -> str:
        return "".join(f"def _pe{n}{'(' + '; '.join('$' + v for v in used) + ')' if used else ''}: {expr}\n;\n"
                       for (expr, used), n in self.defs.items())

    def never(self) -> str:
        """A call of every function, in a branch never taken: jq checks the variables of
        the functions in use only."""
        calls = [f"_pe{n}({'; '.join('null' for _ in used)})" if used else f"_pe{n}"
                 for (_, used), n in self.defs.items()]
        return f"(if false then ({', '.join(calls)}) else empty end)"


def build_checked_program(defn: Definition) -> str:
    """The fused program with every expression of the definition (those it does not run
    too: write paths, scale) a function of its own: one jq compile that checks what
    `check_expressions` checks and compiles the fused program (issue 24: jq compiles in
    time proportional to the text, and the two programs are each as long)."""
    calls = _Calls()
    body = build_program(defn, calls)
    for _, expr, variables in expressions(defn):
        calls(expr, variables, False)
    return f"{calls.head()}({body}), {calls.never()}"


def compile_checked(defn: Definition, source: str) -> Any:
    """The definition's fused program, its expressions checked: in one compile; when that
    fails, `check_expressions` names the expression at fault, and if none is, the fused
    program is compiled as it stands (its error, or the program)."""
    try:
        return jq.compile(build_checked_program(defn))
    except ValueError:
        pass
    check_expressions(defn, source)
    return compile_program(build_program(defn), defn.name)


def build_paths_program(defn: Definition) -> str:
    """Absolute paths of every instance's pod template parts, per component, then the
    path of the suspend field: what mutation writes through."""
    comps = []
    for comp in defn.components:
        pod = comp.pod
        parts = {k: (v, False) for k, v in (("template", pod.template), ("spec", pod.spec),
                                            ("metadata", pod.metadata)) if v}
        for n in PATCHABLE if pod.fields else ():
            f = getattr(pod.fields, n)
            written = _write(f)
            if written:
                parts[f"f.{n}"] = (written, isinstance(f, FieldExpr) and f.writeFrom == "object")
        # absolute paths; a field whose expression is no path expression can be read but not
        # written: mark it, and fail only if a patch needs it
        entries = ", ".join(
            f'{json.dumps(k)}: (try ({"$root | " if from_object else ""}[path({v})]'
            f' | if length > 0 then {"" if from_object else "$path + "}.[0] else null end) catch "{NOT_A_PATH}")'
            for k, (v, from_object) in parts.items())
        comps.append(f'[path({_instances(comp)}) as $path | ($path | if length > 0 then .[-1] else null end)'
                     f' as $key | $root | getpath($path) | {{{entries}}}]' if entries else "[]")
    suspend = f"([path({defn.suspend.path})] | first // null)" if defn.suspend else "null"
    return f". as $root | {_lets(defn)}[" + ", ".join(comps) + f"] + [{suspend}]"


def compile_program(text: str, name: str) -> Any:
    try:
        return jq.compile(text)
    except ValueError as e:  # a bug in fusing, or expressions that only clash when fused
        first = str(e).split(" at <top-level>")[0].split("\n")[0].removeprefix("jq: error: ")
        raise DefinitionError(f"definition {name}: each expression compiles alone, but not together in "
                              f"placer's fused program ({first}); please report this") from None


def _eval(expr: str, value: Any, lets: dict[str, Any], **args: Any) -> Any:
    return jq.compile(expr, args={"root": None, "key": None, "path": None, "instances": None, "conds": None,
                                  **lets, **args}
                      ).input_value(value).all()


@dataclass(frozen=True)
class _Failure:
    """The first expression `diagnose` finds failing: where, which, and jq's message."""

    field: str
    expression: str
    message: str


def diagnose(defn: Definition, obj: Any, error: str, objname: str | None) -> EvaluationError:
    """Find the first expression of `defn` that fails on `obj` (slow path, errors only), in
    the fused program's order: lets, components, status rules, suspend path and gangs."""
    lets: dict[str, Any] = {}
    found = (_replay_lets(defn, obj, lets) or _replay_components(defn, obj, lets)
             or _replay_status(defn, obj, lets) or _replay_wholes(defn, obj, lets))
    if found is None:
        return EvaluationError(error.split("\n")[0], definition=defn.name, field="<program>",
                               expression="(fused program)", obj=objname)
    return EvaluationError(found.message.split("\n")[0], definition=defn.name, field=found.field,
                           expression=found.expression, obj=objname)


def _replay(field: str, expr: str, value: Any, lets: dict[str, Any], least: int, most: float,
            **args: Any) -> _Failure | None:
    """Run one expression; a failure if jq raises or it yields outside `least..most` values."""
    try:
        values = _eval(expr, value, lets, **args)
    except ValueError as e:
        return _Failure(field, expr, str(e))
    if not least <= len(values) <= most:
        return _Failure(field, expr, f"produced {len(values)} values, expected one")
    return None


def _replay_lets(defn: Definition, obj: Any, lets: dict[str, Any]) -> _Failure | None:
    """Bind each `let` into `lets` in order, as the fused program does."""
    for name, expr in defn.let.items():
        try:
            lets[name] = _eval(expr, obj, lets, root=obj)[0]
        except ValueError as e:
            return _Failure(f"let.{name}", expr, str(e))
        except IndexError:
            return _Failure(f"let.{name}", expr, "produced no value")
    return None


def _replay_components(defn: Definition, obj: Any, lets: dict[str, Any]) -> _Failure | None:
    """Every component's instance paths, then each of its fields on each instance."""
    for i, comp in enumerate(defn.components):
        inst = _instances(comp)
        try:
            paths = _eval(f"[path({inst})]", obj, lets, root=obj)[0]
        except ValueError as e:
            return _Failure(f"components[{i}].instances", inst, str(e))
        for p in paths:
            key = p[-1] if p else None
            element = _getpath(obj, p)
            for field, expr in component_fields(comp).values():
                found = _replay(f"components[{i}].{field}", expr, element, lets, 1, 1, root=obj, key=key, path=p)
                if found:
                    return found
    return None


def _replay_status(defn: Definition, obj: Any, lets: dict[str, Any]) -> _Failure | None:
    """The status rules: `when` may yield any number of values, reason and message one at most."""
    conds = _conditions(obj)
    for j, rule in enumerate(defn.status.rules):
        for field in ("when", "reason", "message"):
            expr = getattr(rule, field)
            most = math.inf if field == "when" else 1
            found = _replay(f"status.rules[{j}].{field}", expr, obj, lets, 0, most, root=obj,
                            conds=conds) if expr else None
            if found:
                return found
    return None


def _replay_wholes(defn: Definition, obj: Any, lets: dict[str, Any]) -> _Failure | None:
    """The expressions on the whole object: the suspend path (one value at most), gangs (one)."""
    for field, whole, least in (("suspend.path", defn.suspend.path if defn.suspend else None, 0),
                                ("gangs", defn.gangs, 1)):
        found = _replay(field, whole, obj, lets, least, 1, root=obj, instances=[]) if whole else None
        if found:
            return found
    return None


def _conditions(obj: Any) -> dict[str, Any]:
    """`$conds` as the fused program builds it: the last condition of each type."""
    status = obj.get("status") if isinstance(obj, dict) else None
    found = status.get("conditions") if isinstance(status, dict) else None
    return {c["type"]: c for c in (found if isinstance(found, list) else ())
            if isinstance(c, dict) and isinstance(c.get("type"), str)}


def _getpath(obj: Any, path: list[Any]) -> Any:
    for part in path:
        if obj is None:
            return None
        obj = obj[part] if isinstance(obj, list) and isinstance(part, int) else (obj or {}).get(part)
    return obj
