"""A workload definition as placer holds it: plain frozen dataclasses, no validation.

`placer.definitions.schema` validates a definition from user input (a `--catalog` directory,
a WorkloadDefinition registered in a cluster, a Karta's translation) with pydantic and hands
back these classes; placer's own catalog, checked by its tests against that schema
(tests/definitions), is built here directly from its documents (`from_document`): a plan of
built-in kinds neither builds nor runs the pydantic models (issue 24: about 0.025 s CPU of
every command's start). The field names are the documents' own (camelCase).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from typing import Any, Iterator, Mapping


@dataclass(frozen=True)
class Match:
    apiVersion: str
    kind: str


@dataclass(frozen=True)
class FieldExpr:
    """A pod field read by one expression and written through another path (schema.FieldExpr)."""

    read: str
    write: str | None = None
    writeFrom: str = "instance"             # "instance" | "object"


PodField = str | FieldExpr


@dataclass(frozen=True)
class PodFields:
    containers: PodField | None = None
    initContainers: PodField | None = None
    resources: PodField | None = None
    mainContainer: str | None = None
    nodeSelector: PodField | None = None
    tolerations: PodField | None = None
    affinity: PodField | None = None
    labels: PodField | None = None
    annotations: PodField | None = None
    schedulerName: PodField | None = None
    priorityClassName: PodField | None = None

    def items(self) -> Iterator[tuple[str, PodField | None]]:
        """(name, value) of every field, in declaration order (as a pydantic model iterates)."""
        return ((f.name, getattr(self, f.name)) for f in fields(self))


POD_FIELDS = tuple(f.name for f in fields(PodFields))


@dataclass(frozen=True)
class PodTemplate:
    template: str | None = None
    spec: str | None = None
    metadata: str | None = None
    fields: PodFields | None = None


@dataclass(frozen=True)
class Component:
    name: str
    pod: PodTemplate
    instances: str | None = None
    instanceId: str | None = None
    replicas: str | None = None
    minReplicas: str | None = None
    maxReplicas: str | None = None
    podsPerReplica: str | None = None
    podSelector: str | None = None


@dataclass(frozen=True)
class StatusRule:
    phase: str
    when: str | None = None
    condition: str | None = None
    conditionStatus: str = "True"
    reason: str | None = None
    message: str | None = None


@dataclass(frozen=True)
class Status:
    rules: list[StatusRule] = field(default_factory=list)


@dataclass(frozen=True)
class Suspend:
    path: str


@dataclass(frozen=True)
class Scale:
    replicas: str
    default: int = 1
    unit: str = "replica"
    format: str = "integer"                  # "integer" | "string"


@dataclass(frozen=True)
class Definition:
    name: str
    matches: list[Match]
    components: list[Component]
    description: str = ""
    let: dict[str, str] = field(default_factory=dict)
    status: Status = field(default_factory=Status)
    gangs: str | None = None
    suspend: Suspend | None = None
    gangPodLabel: str | None = None
    scale: Scale | None = None


def expression(expr: str) -> str:
    """An expression as placer embeds it: a trailing jq comment would swallow what follows it
    in a larger program, so one holding `#` ends with a newline."""
    return expr + "\n" if "#" in expr and not expr.endswith("\n") else expr


def by_dependency(lets: Mapping[str, str]) -> dict[str, str]:
    """The lets in an order where each comes after the lets it uses, else as written. A
    definition stored in the cluster (WorkloadDefinition) comes back with its keys sorted
    (the API server keeps objects as Go maps), so the written order cannot be relied on."""
    uses = {n: {m for m in lets if m != n and re.search(rf"\${m}\b", str(e))} for n, e in lets.items()}
    ordered: dict[str, str] = {}
    while len(ordered) < len(lets):
        ready = next((n for n in lets if n not in ordered and uses[n] <= ordered.keys()), None)
        if ready is None:
            cycle = sorted(n for n in lets if n not in ordered)
            raise ValueError(f"lets {', '.join(cycle)} use each other in a cycle")
        ordered[ready] = lets[ready]
    return ordered


# --- from a document known to be valid ---------------------------------------------------

def _expr(value: Any) -> Any:
    return expression(value) if isinstance(value, str) else value


def _exprs(data: Mapping[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    return {n: _expr(data[n]) for n in names if data.get(n) is not None}


def _pod_field(value: Any) -> Any:
    if isinstance(value, Mapping):
        return FieldExpr(**{**value, **_exprs(value, ("read", "write"))})
    return _expr(value)


def _pod(data: Mapping[str, Any]) -> PodTemplate:
    given = data.get("fields")
    pod_fields = PodFields(**{k: _pod_field(v) for k, v in given.items() if v is not None}) \
        if given is not None else None
    return PodTemplate(**_exprs(data, ("template", "spec", "metadata")), fields=pod_fields)


def _component(data: Mapping[str, Any]) -> Component:
    return Component(name=data["name"], pod=_pod(data["pod"]),
                     **_exprs(data, ("instances", "instanceId", "replicas", "minReplicas", "maxReplicas",
                                     "podsPerReplica", "podSelector")))


def _rule(data: Mapping[str, Any]) -> StatusRule:
    plain = {k: data[k] for k in ("phase", "condition", "conditionStatus") if data.get(k) is not None}
    return StatusRule(**plain, **_exprs(data, ("when", "reason", "message")))


def from_document(data: Mapping[str, Any]) -> Definition:
    """The definition a valid document (or a validated model's dump) says, with the defaults
    and normalisations the schema applies (expressions ending a comment, lets by dependency).
    Nothing is checked: for documents that `schema.parse_definition` accepts (placer's own
    catalog, tested so; or that function's own result)."""
    status, suspend, scale = data.get("status"), data.get("suspend"), data.get("scale")
    return Definition(
        name=data["name"], description=data.get("description") or "",
        matches=[Match(m["apiVersion"], m["kind"]) for m in data["matches"]],
        components=[_component(c) for c in data["components"]],
        let=by_dependency({k: expression(v) for k, v in (data.get("let") or {}).items()}),
        status=Status([_rule(r) for r in (status or {}).get("rules") or ()]),
        gangs=_expr(data.get("gangs")), gangPodLabel=data.get("gangPodLabel"),
        suspend=Suspend(expression(suspend["path"])) if suspend is not None else None,
        scale=Scale(**{**scale, "replicas": expression(scale["replicas"])}) if scale is not None else None)
