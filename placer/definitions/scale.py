"""`placer.dev/spread`: the spread policy checked against the definition, and, for `divide`,
the workload's scaling (its definition's `scale`: the scalable replica paths, one unit, the
part every copy has) computed by interpreting the object again at one unit and at none."""

from __future__ import annotations

import copy
import dataclasses
import math
from typing import Any, Callable, Mapping

import jq

from placer.definitions.catalog import CompiledDefinition
from placer.model.errors import InputError
from placer.model.names import ANN_SPREAD
from placer.model.spread import DIVIDE, spread_of
from placer.model.workload import Scaling, Workload

Reinterpret = Callable[[Mapping[str, Any]], Workload]

_programs: dict[tuple[str, str], Any] = {}


def _paths(compiled: CompiledDefinition, obj: Mapping[str, Any]) -> list[list[Any]]:
    defn = compiled.definition
    assert defn.scale is not None
    lets = "".join(f"({expr}) as ${name} | " for name, expr in defn.let.items())
    text = f". as $root | {lets}[path({defn.scale.replicas})]"
    program = _programs.get((compiled.name, text))
    if program is None:
        program = _programs[(compiled.name, text)] = jq.compile(text)
    return program.input_value(obj).first()


def _value(obj: Any, path: list[Any], default: int) -> int | None:
    for part in path:
        if isinstance(obj, dict):
            obj = obj.get(part)
        elif isinstance(obj, list) and isinstance(part, int) and -len(obj) <= part < len(obj):
            obj = obj[part]
        else:
            obj = None
        if obj is None:
            return default
    try:
        return int(str(obj).strip())
    except ValueError:
        return None


def set_path(obj: dict[str, Any], path: tuple[str | int, ...], value: Any) -> None:
    """Write `value` at `path`, creating the maps on the way."""
    parent: Any = obj
    for part in path[:-1]:
        nxt = parent[int(part)] if isinstance(parent, list) else parent.get(part)
        if nxt is None:
            nxt = parent[part] = {}
        parent = nxt
    parent[path[-1]] = value


def with_units(obj: Mapping[str, Any], scaling: Scaling, units: int, *, in_place: bool = False) -> dict[str, Any]:
    """A copy of the object whose scalable paths hold a share of `units` units (`in_place`:
    the object itself, a dict the caller owns)."""
    out = obj if in_place and isinstance(obj, dict) else copy.deepcopy(dict(obj))
    for path, value in zip(scaling.paths, scaling.replicas_at(units)):
        set_path(out, path, str(value) if scaling.string else value)
    return out


def share_object(obj: Mapping[str, Any], scaling: Scaling, replicas: int, *, in_place: bool = False
                 ) -> dict[str, Any]:
    """A copy of the object holding a share of `replicas` (a whole number of units)."""
    per = sum(scaling.replicas) // scaling.units if scaling.units else 1
    return with_units(obj, scaling, replicas // max(per, 1), in_place=in_place)


def with_scaling(w: Workload, compiled: CompiledDefinition, obj: Mapping[str, Any],
                 reinterpret: Reinterpret) -> Workload:
    """The workload with its spread policy checked and, for `divide`, its scaling."""
    spec = spread_of(w.annotations, w.key, w.source)
    if spec is None or spec.mode != DIVIDE:
        return w
    scale = compiled.definition.scale
    if scale is None:
        raise InputError(f"annotation {ANN_SPREAD}: divide: {w.kind} ({w.api_version}) has no scalable "
                         f"replicas (definition {compiled.name} gives no `scale`); use duplicate",
                         obj=w.key, source=w.source)
    paths = [tuple(p) for p in _paths(compiled, obj)]
    values = [_value(obj, list(p), scale.default) for p in paths]
    bad = next((p for p, v in zip(paths, values) if v is None or v < 0), None)
    if not paths or bad is not None:
        where = ".".join(map(str, bad)) if bad else scale.replicas.strip()
        raise InputError(f"annotation {ANN_SPREAD}: divide: {where} is not a replica count", obj=w.key,
                         source=w.source)
    counts = [v for v in values if v is not None]
    units = math.gcd(*counts)
    bare = copy.deepcopy(dict(obj))
    for name in [k for k in (bare.get("metadata") or {}).get("annotations") or {} if k.startswith(ANN_SPREAD)]:
        del bare["metadata"]["annotations"][name]
    draft = Scaling(tuple(paths), tuple(counts), max(units, 1), w, w, scale.unit, scale.format == "string")
    # pods are affine in the units: a share of k units is `fixed` + k x `unit`
    one, two = (reinterpret(with_units(bare, draft, k)) for k in (1, 2))
    unit = _minus(two, one)
    fixed = _minus(one, unit)
    unit, names = _unit_gang(w, units, one, two, unit)
    return dataclasses.replace(w, scaling=Scaling(tuple(paths), tuple(counts), units, unit, fixed, scale.unit,
                                                  scale.format == "string", names))


def _unit_gang(w: Workload, units: int, one: Workload, two: Workload, unit: Workload
               ) -> tuple[Workload, tuple[str, ...]]:
    """The unit with its own gang where each unit is one (one gang at one unit, two at two, one
    per unit in the whole workload, named in the same order), and the units' gang names. Any other
    gang that asks for topology (a RayService's one gang of head and workers spans the shares)
    cannot be kept per share: refused, one line."""
    names = tuple(g.name for g in w.gangs)
    if len(one.gangs) == 1 and len(two.gangs) == 2 and len(names) == units \
            and names[:2] == tuple(g.name for g in two.gangs) and names[:1] == (one.gangs[0].name,):
        return dataclasses.replace(unit, gangs=(two.gangs[1],)), names
    asking = next((g for g in (*w.gangs, *two.gangs) if g.topology), None)
    if asking is not None:
        raise InputError(f"annotation {ANN_SPREAD}: divide: gang {asking.name} of the {w.kind} asks for topology "
                         f"{asking.topology[0].key} but spans its shares (each share is its own copy); it cannot "
                         "be kept per share: use duplicate, or drop the topology request", obj=w.key, source=w.source)
    return unit, ()


def _minus(a: Workload, b: Workload) -> Workload:
    """`a`'s pods less `b`'s, instance by instance (no gangs: a share's gangs are its units)."""
    less = {i.key: i.replicas for i in b.instances}
    inst = []
    for i in a.instances:
        replicas = max(0, i.replicas - less.get(i.key, 0))
        if replicas:
            inst.append(dataclasses.replace(i, replicas=replicas, pods=replicas * i.pods_per_replica))
    return dataclasses.replace(a, instances=tuple(inst), gangs=())
