"""Where each jq expression of a definition runs and which variables it may use, and the
check that they compile: for definitions from user input (schema-validated) and for the
fused programs of placer's own (`placer.definitions.program`). No pydantic here.

The contexts and their variables are described in `placer.definitions.schema`.
"""

from __future__ import annotations

import re

import jq

from placer.definitions.spec import Component, Definition, FieldExpr, PodFields
from placer.model.errors import DefinitionError

# Which jq variables each kind of expression may use.
COMPONENT_VARS = ("root", "key", "path")
OBJECT_VARS = ("root",)
GANG_VARS = ("root", "instances")
STATUS_VARS = ("root", "conds")             # $conds: condition type -> its last condition


def _first_line(text: str) -> str:
    return " ".join(text.split("\n")[0].split())


# (field path, expression, the jq variables it may use)
ExprAt = tuple[str, str, tuple[str, ...]]


def expressions(defn: Definition) -> list[ExprAt]:
    """(field path, expression, variables it may use) for every expression, lets first:
    each let may use the lets before it, every later expression all of them."""
    out: list[ExprAt] = []
    lets: tuple[str, ...] = ()
    for name, expr in defn.let.items():
        out.append((f"let.{name}", expr, OBJECT_VARS + lets))
        lets += (name,)
    for i, comp in enumerate(defn.components):
        out += _component_expressions(f"components[{i}]", comp, OBJECT_VARS + lets, COMPONENT_VARS + lets)
    for j, rule in enumerate(defn.status.rules):
        out += [(f"status.rules[{j}].{name}", getattr(rule, name), STATUS_VARS + lets)
                for name in ("when", "reason", "message") if getattr(rule, name)]
    if defn.suspend:
        out.append(("suspend.path", defn.suspend.path, OBJECT_VARS + lets))
    if defn.gangs:
        out.append(("gangs", defn.gangs, GANG_VARS + lets))
    if defn.scale:
        out.append(("scale.replicas", defn.scale.replicas, OBJECT_VARS + lets))
    return out


def _component_expressions(at: str, comp: Component, obj_vars: tuple[str, ...],
                           comp_vars: tuple[str, ...]) -> list[ExprAt]:
    """One component's expressions: `instances` runs on the object, the rest on an instance."""
    out: list[ExprAt] = [(f"{at}.instances", comp.instances, obj_vars)] if comp.instances else []
    for name in ("instanceId", "replicas", "minReplicas", "maxReplicas", "podsPerReplica", "podSelector"):
        if getattr(comp, name):
            out.append((f"{at}.{name}", getattr(comp, name), comp_vars))
    for name in ("template", "spec", "metadata"):
        if getattr(comp.pod, name):
            out.append((f"{at}.pod.{name}", getattr(comp.pod, name), comp_vars))
    for name, value in (comp.pod.fields or PodFields()).items():
        if isinstance(value, FieldExpr):
            out.append((f"{at}.pod.fields.{name}.read", value.read, comp_vars))
            if value.write:
                out.append((f"{at}.pod.fields.{name}.write", value.write, comp_vars))
        elif value:
            out.append((f"{at}.pod.fields.{name}", value, comp_vars))
    return out


def _as_program(exprs: list[ExprAt]) -> str:
    # Each expression becomes its own function, so it must parse on its own (no
    # unbalanced parentheses leaking into its neighbours) and use only its variables;
    # each is called, since jq only resolves the variables of functions in use.
    defs = "".join(f"def _e{n}({'; '.join('$' + v for v in variables)}): {expr}\n;\n"
                   for n, (_, expr, variables) in enumerate(exprs))
    calls = ", ".join(f"_e{n}({'; '.join('.' for _ in variables)})" for n, (_, _, variables) in enumerate(exprs))
    return f"{defs}({calls or 'empty'}) | empty"


def check_expressions(defn: Definition, source: str) -> None:
    """Compile every expression of the definition; one jq compile in the common case."""
    exprs = expressions(defn)
    try:
        jq.compile(_as_program(exprs))
        return
    except ValueError:
        pass
    for one in exprs:                             # slow path: find the culprit
        field, expr, variables = one
        try:
            jq.compile(_as_program([one]))
        except ValueError as e:
            raise DefinitionError(f"{field}: jq does not compile {expr.strip()!r}: "
                                  f"{user_error(expr, variables) or _first_line(str(e))}", source=source) from None
    raise DefinitionError("expressions do not compile together", source=source)


_JQ_ERROR = re.compile(r"jq: error: (?P<msg>.*?) at <top-level>, line (?P<line>\d+), column (?P<col>\d+)")


def user_error(expr: str, variables: tuple[str, ...]) -> str | None:
    """jq's complaint about `expr` with line and column in the user's own text (not in the
    program placer wraps it in): its variables are bound on a line of their own first."""
    try:
        jq.compile("".join(f"null as ${v} | " for v in variables) + "\n" + expr)
        return None
    except ValueError as e:
        m = _JQ_ERROR.search(str(e))
        if not m:
            return _first_line(str(e)).removeprefix("jq: error: ")
        line, col = int(m["line"]) - 1, int(m["col"])
        where = f"line {line}, column {col}" if "\n" in expr.strip() else f"column {col}"
        return f"{m['msg']} at {where}"
