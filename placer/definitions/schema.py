"""Workload definitions: the schema of `catalog/*.yaml`, validated strictly.

A definition says, with jq expressions, where a workload type keeps its pod templates,
counts, pod selectors, status and gangs. Every expression is compiled when the
definition loads (so a typo fails at load, naming its field), and `placer.definitions.program`
fuses all of a definition's expressions into one jq program per definition for speed.

Expression contexts (the jq variables available):
- `$root`: the whole object, everywhere.
- component `instances`: evaluated on the object; must be a *path expression* (e.g.
  `.spec.replicatedJobs[]`, `.spec.services[]`, `.spec.transformer | select(. != null)`),
  each output is one instance; absent means the object itself is the single instance.
- every other component expression: `.` is the instance element, `$key` its key in the
  parent (array index or map key; null for the object itself).
- status rules, suspend: `.` is the object.
- gangs: `.` is the object, `$instances` the interpreted instances
  (`[{component, instance, replicas, podsPerReplica, pods}]`).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import ErrorDetails

from placer.definitions import spec
from placer.definitions.expressions import check_expressions
from placer.model.errors import DefinitionError


def _nonempty(expr: str) -> str:
    # Syntax is checked per definition in one jq compile (see check_expressions): one
    # compile per expression costs about a millisecond each, hundreds per catalog.
    if not isinstance(expr, str) or not expr.strip():
        raise ValueError("expected a non-empty jq expression")
    return spec.expression(expr)


Expr = Annotated[str, AfterValidator(_nonempty)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Match(_Strict):
    apiVersion: str
    kind: str


class FieldExpr(_Strict):
    """A pod field read by one expression and written (by mutation) through a path,
    relative to the instance element, or with `writeFrom: object` relative to the whole
    object (to reach a parent's field: `getpath($path[:-2]) | .schedulerName`)."""

    read: Expr
    write: Expr | None = None
    writeFrom: Literal["instance", "object"] = "instance"


PodField = Expr | FieldExpr


class PodFields(_Strict):
    """Pod fields scattered in the object (or overriding a template's). Each is a jq
    expression over the instance element; a plain string is both read and (when it is a
    path expression) written."""

    containers: PodField | None = None
    initContainers: PodField | None = None
    # ResourceRequirements of the main container (a vendor's own resource struct can be
    # mapped here to real resource names, e.g. Dynamo v1alpha1 `resources.limits.gpu`)
    resources: PodField | None = None
    mainContainer: Expr | None = None        # name of the main container; default: the first
    nodeSelector: PodField | None = None
    tolerations: PodField | None = None
    affinity: PodField | None = None
    labels: PodField | None = None
    annotations: PodField | None = None
    schedulerName: PodField | None = None
    priorityClassName: PodField | None = None


class PodTemplate(_Strict):
    """Where a component's pod template lives, in one of three forms:
    `template` (a PodTemplateSpec), `spec` (+ optional `metadata`), or `fields` alone."""

    template: Expr | None = None
    spec: Expr | None = None
    metadata: Expr | None = None
    fields: PodFields | None = None

    @model_validator(mode="after")
    def _one_form(self) -> "PodTemplate":
        if self.template and (self.spec or self.metadata):
            raise ValueError("give either template, or spec (+ metadata), not both")
        if not (self.template or self.spec or self.fields):
            raise ValueError("give one of template, spec, fields")
        if self.metadata and not self.spec:
            raise ValueError("metadata goes with spec")
        return self


class Component(_Strict):
    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")]
    instances: Expr | None = None
    instanceId: Expr | None = None
    pod: PodTemplate
    replicas: Expr | None = None              # default 1
    minReplicas: Expr | None = None
    maxReplicas: Expr | None = None
    podsPerReplica: Expr | None = None        # default 1
    podSelector: Expr | None = None           # -> {label: value}


PhaseName = Literal["Pending", "Initializing", "Running", "Completed", "Failed"]


class StatusRule(_Strict):
    """First matching rule wins. `condition` matches the last condition of that type
    (training operators append), with `conditionStatus` (default "True")."""

    phase: PhaseName
    when: Expr | None = None
    condition: str | None = None
    conditionStatus: Literal["True", "False", "Unknown"] = "True"
    reason: Expr | None = None
    message: Expr | None = None

    @model_validator(mode="after")
    def _one_test(self) -> "StatusRule":
        if bool(self.when) == bool(self.condition):
            raise ValueError("give exactly one of when, condition")
        return self


class Status(_Strict):
    rules: list[StatusRule] = []


class Suspend(_Strict):
    path: Expr                                # path expression; truthy = suspended


class Scale(_Strict):
    """What `placer.dev/spread: divide` splits among clusters. `replicas` is a path expression
    over the object naming the scalable replica count(s) (one path, or several: every worker
    group); it is also the write path that sets a share's replicas on its copy. One replica of
    each path is the `unit` that stays together (a LeaderWorkerSet group, a Ray worker replica of
    numOfHosts pods, a multi-node NIM replica): a share is a whole number of units. `default`:
    the count when the field is absent; `format: string` writes it as a string (an annotation)."""

    replicas: Expr
    default: Annotated[int, Field(ge=0)] = 1
    unit: str = "replica"
    format: Literal["integer", "string"] = "integer"


# jq variables the engine binds itself; a `let` may not shadow them
RESERVED_VARS = frozenset({"root", "key", "path", "instances", "c", "conds", "x", "r", "lo", "hi"})


def _let_names(lets: dict[str, str]) -> dict[str, str]:
    for name in lets:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) or name in RESERVED_VARS:
            raise ValueError(f"let name {name!r} must be an identifier other than {', '.join(sorted(RESERVED_VARS))}")
    return spec.by_dependency(lets)


class Definition(_Strict):
    name: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9.-]*$")]
    description: str = ""
    matches: Annotated[list[Match], Field(min_length=1)]
    # values computed once per object (`.` is the object) and bound as $name in every
    # later expression: for what several components or rules need (a version, a mode)
    let: Annotated[dict[str, Expr], AfterValidator(_let_names)] = {}
    components: Annotated[list[Component], Field(min_length=1)]
    status: Status = Status()
    gangs: Expr | None = None                 # -> [{name | names, members:[{component, instance, pods?}], minMember?}]
    suspend: Suspend | None = None
    # a pod label whose value tells apart the gangs that share one pod template (the
    # groups of a LeaderWorkerSet): lets a topology hand-off keep each gang in one domain
    gangPodLabel: str | None = None
    # the scalable replica path(s) `divide` splits among clusters (None: the type refuses divide)
    scale: Scale | None = None

    @model_validator(mode="after")
    def _unique_components(self) -> "Definition":
        names = [c.name for c in self.components]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"duplicate component names: {', '.join(sorted(dup))}")
        return self


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("str", "FieldExpr") or str(part).startswith("function-"):
            continue                          # pydantic's union-branch labels
        else:
            out += ("." if out else "") + str(part)
    return out or "<root>"


def parse_definition(data: Any, source: str, *, check: bool = True) -> spec.Definition:
    """Validate a definition document; errors read `source: path.to.field: message`.
    `check=False`: its jq expressions are left to the caller, which compiles them
    (`placer.definitions.program.compile_checked` checks them in the same compile).
    The definition comes back as placer holds it inside (`placer.definitions.spec`)."""
    if not isinstance(data, dict):
        raise DefinitionError("a definition must be a mapping", source=source)
    try:
        model = Definition.model_validate(data)
    except ValidationError as e:
        first = _best_error(e.errors())
        msg = re.sub(r"^Value error, ", "", first["msg"])
        raise DefinitionError(f"{_loc(first['loc'])}: {msg}", source=source) from None
    defn = spec.from_document(model.model_dump())
    if check:
        check_expressions(defn, source)
    return defn


def _best_error(errors: list[ErrorDetails]) -> ErrorDetails:
    # Union fields report one error per branch; the extra-field one is the informative one.
    for err in errors:
        if err["type"] == "extra_forbidden":
            return err
    return errors[0]
