"""Object + definition -> Workload; and rewriting every pod template of an object.

Pure functions: no I/O. One fused jq program call per object; the rest is assembling
frozen values and parsing quantities exactly.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import threading
from typing import Any, Iterable, Mapping, Protocol, Sequence

import orjson

from placer.definitions.catalog import Catalog, CompiledDefinition
from placer.definitions.pods import pod_shape
from placer.definitions.program import NOT_A_PATH, PATCHABLE, Columns, diagnose
from placer.definitions.scale import with_scaling
from placer.definitions.topology_requests import with_topology
from placer.model.errors import EvaluationError, InputError, UnknownKind
from placer.model.names import ANN_MESSAGE, ANN_PHASE, ANN_SPREAD, PLACED_CLUSTER, SHARES_STATUS
from placer.model.podspec import DEFAULT_GPU_RESOURCES, gpu_count, value_kind
from placer.model.selectors import label_selector_parts
from placer.model.workload import Gang, Instance, Phase, PodShape, Workload

PATCH_KEYS = PATCHABLE


def object_name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    name = meta.get("name") or meta.get("generateName") or "?"
    return f"{obj.get('kind', '?')} {meta.get('namespace') or 'default'}/{name}"


class Lookup(Protocol):
    """What finds a kind's definition: a Catalog, or the daemon's holder of the current one."""

    def lookup(self, api_version: str, kind: str) -> CompiledDefinition | None: ...


def definition_for(obj: Mapping[str, Any], catalog: Lookup, source: str | None = None) -> CompiledDefinition:
    api, kind = obj.get("apiVersion"), obj.get("kind")
    found = catalog.lookup(str(api), str(kind))
    if found is None:
        raise UnknownKind(f"no workload definition for {api}/{kind}; add one to a catalog directory "
                          f"(--catalog DIR) or register it with `placer catalog apply`", source=source)
    return found


def interpret(obj: Mapping[str, Any], catalog: Catalog, *,
              gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES, source: str | None = None) -> Workload:
    compiled = definition_for(obj, catalog, source)
    return _interpret(obj, compiled, json_text(jq_view(obj)), gpu_resources, source)


class Interpreter:
    """`interpret` for a long-lived caller that keeps re-reading the same objects (the
    daemon lists every placed object each planning round): results are remembered by what
    jq sees of the object, and `sweep()`, called every few seconds, forgets what was not asked
    for in the last two such periods, so memory follows the working set. Thread-safe."""

    def __init__(self, catalog: Lookup, gpu_resources: Sequence[str] = DEFAULT_GPU_RESOURCES):
        self.catalog, self.gpu_resources = catalog, tuple(gpu_resources)
        # each entry keeps its definition alive, so that its id is never another's while remembered
        self._current: dict[tuple[int, str], tuple[CompiledDefinition, Workload]] = {}
        self._previous: dict[tuple[int, str], tuple[CompiledDefinition, Workload]] = {}
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def __call__(self, obj: Mapping[str, Any], source: str | None = None) -> Workload:
        compiled = definition_for(obj, self.catalog, source)
        text = json_text(jq_view(obj))
        key = (id(compiled), text)          # a definition changed in the catalog is a new object
        with self._lock:
            entry = self._current.get(key) or self._previous.pop(key, None)
            if entry is not None:
                self._current[key] = entry
                self.hits += 1
        found = entry[1] if entry is not None else None
        if found is None:
            found = _interpret(obj, compiled, text, self.gpu_resources, source)
            with self._lock:
                self._current[key] = (compiled, found)
                self.misses += 1
        else:       # same content: only what jq does not see (jq_view) differs
            meta = obj.get("metadata") or {}
            found = dataclasses.replace(found, annotations=dict(meta.get("annotations") or {}),
                                        labels=dict(meta.get("labels") or {}), source=source, obj=obj)
        return found

    def sweep(self) -> None:
        with self._lock:
            self._previous, self._current = self._current, {}


def _interpret(obj: Mapping[str, Any], compiled: CompiledDefinition, text: str,
               gpu_resources: Sequence[str], source: str | None) -> Workload:
    defn = compiled.definition
    columns = compiled.layout.columns
    n = len(columns)
    try:
        out = _first(compiled.program, text)
        if len(out) != n + 3 or len(out[n]) != 3:   # gangs, suspend or a status rule's reason or
            _uneven()                               # message yielded no value or several
        for i in range(n):
            width = columns[i].width
            for row in out[i]:
                if len(row) != width:
                    _uneven()
    except ValueError as e:
        err = diagnose(defn, obj, str(e), object_name(obj))
        err.source = source
        raise err from None
    at = _Where(compiled, obj, source)
    meta = obj.get("metadata") or {}
    for key in ("labels", "annotations"):
        if not isinstance(meta.get(key) or {}, dict):
            raise at.invalid(f"metadata.{key}: expected a map, got {value_kind(meta[key])}")
    instances = [_instance(at, i, columns[i], row, gpu_resources) for i in range(n) for row in out[i]]
    phase, reason, message = out[n]
    suspended = out[n + 1]
    w = Workload(
        api_version=obj["apiVersion"], kind=obj["kind"],
        namespace=meta.get("namespace") or "default", name=meta.get("name") or meta.get("generateName") or "",
        definition=defn.name, phase=Phase(phase), reason=_text(reason), message=_text(message),
        instances=tuple(instances),
        gangs=with_topology(_gangs(at, out[n + 2], instances), meta.get("annotations") or {}, instances,
                            object_name(obj), source),
        labels=dict(meta.get("labels") or {}), annotations=dict(meta.get("annotations") or {}),
        suspended=None if suspended is None else bool(suspended),
        source=source, obj=obj)
    if not any(k.startswith(ANN_SPREAD) for k in w.annotations):
        return w
    return with_scaling(w, compiled, obj, lambda o: _interpret(o, compiled, json_text(jq_view(o)), gpu_resources,
                                                                 source))


class _Where:
    """What an interpretation error names: the definition, the object and its source. The
    object's name is only built when an error needs it."""

    __slots__ = ("compiled", "obj", "source")

    def __init__(self, compiled: CompiledDefinition, obj: Mapping[str, Any], source: str | None):
        self.compiled, self.obj, self.source = compiled, obj, source

    def bad(self, field: str, expr: str, msg: str) -> EvaluationError:
        return EvaluationError(msg, definition=self.compiled.name, field=field, expression=expr,
                               obj=object_name(self.obj), source=self.source)

    def invalid(self, msg: str) -> InputError:
        return InputError(msg, obj=object_name(self.obj), source=self.source)


def json_text(value: Any) -> str:
    """`value` as JSON text for jq. orjson is several times faster than the json module the
    jq binding would use; json remains the fallback for what orjson refuses (integers
    beyond 64 bits), so both accept the same input."""
    try:
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    except (orjson.JSONEncodeError, TypeError):
        return json.dumps(value)


LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
# what a workload's shape never depends on: bookkeeping every write changes, and what placer
# itself reports on a staging object (where it went, its phase); left out of what jq sees, a
# staging object is interpreted once, not again after placer's finalizer and its report
UNREAD_META = frozenset({"managedFields", "resourceVersion", "finalizers"})
UNREAD_ANNOTATIONS = frozenset({LAST_APPLIED, PLACED_CLUSTER, ANN_PHASE, ANN_MESSAGE, SHARES_STATUS})
UNREAD_LABELS = frozenset({PLACED_CLUSTER})


def jq_view(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """The object as jq sees it: without managedFields and kubectl's last-applied copy, which
    live objects carry (often several KB) and no definition reads, nor its resourceVersion,
    finalizers and placer's own reports (UNREAD_*); labels or annotations left empty are left
    out, as an API server leaves out empty ones (so that an object placer has labelled reads
    as it did before). A shallow copy, only when there is something to drop."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return obj
    maps = {"annotations": UNREAD_ANNOTATIONS, "labels": UNREAD_LABELS}
    trim = [k for k, unread in maps.items()
            if isinstance(meta.get(k), dict) and (not meta[k] or not unread.isdisjoint(meta[k]))]
    if UNREAD_META.isdisjoint(meta) and not trim:
        return obj
    meta = {k: v for k, v in meta.items() if k not in UNREAD_META}
    for k in trim:
        kept = {n: v for n, v in meta[k].items() if n not in maps[k]}
        if kept:
            meta[k] = kept
        else:
            del meta[k]
    return {**obj, "metadata": meta}


def _first(program: Any, text: str) -> Any:
    """The program's one output; none (an expression yielded `empty`) is an error like jq's."""
    try:
        return program.input_text(text).first()
    except StopIteration:
        raise ValueError("the program produced no output: an expression yielded no value") from None


def _uneven() -> bool:
    # an expression yielded no value or several, so a row is misaligned: diagnose names it
    raise ValueError("an expression produced no value or several")


def _text(v: Any) -> str:
    return "" if v is None else str(v)


MAX_COUNT = 2**31 - 1       # Kubernetes replica counts are int32; the solver's model is int64
MAX_GANGS = 100_000         # per workload: a bound on names made from counts, far above real use


def _count(at: _Where, i: int, field: str, value: Any) -> int:
    if type(value) is int and 0 <= value <= MAX_COUNT:
        return value
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_COUNT:
        expr = getattr(at.compiled.definition.components[i], field) or "(default)"
        raise at.bad(f"components[{i}].{field}", expr,
                     f"expected a non-negative integer up to {MAX_COUNT} (an int32), got {value!r}")
    return value


def _instance(at: _Where, i: int, c: Columns, row: list[Any], gpu_resources: Sequence[str]) -> Instance:
    comp = at.compiled.definition.components[i].name
    replicas = 1 if c.replicas is None else _count(at, i, "replicas", row[c.replicas])
    ppr = 1 if c.ppr is None else _count(at, i, "podsPerReplica", row[c.ppr])
    effective = replicas
    if c.min is not None and row[c.min] is not None:
        effective = max(effective, _count(at, i, "minReplicas", row[c.min]))
    if c.max is not None and row[c.max] is not None:
        effective = min(effective, _count(at, i, "maxReplicas", row[c.max]))
    instance = str(row[0])
    if effective * ppr > MAX_COUNT:
        raise at.invalid(f"{comp}/{instance}: {effective} replicas x {ppr} pods each is more than {MAX_COUNT} pods")
    shape = _pod_shape(at, row, c, comp, instance)
    labels, expressions = _selector(at, i, None if c.sel is None else row[c.sel])
    return Instance(component=comp, instance=instance, replicas=effective, pods_per_replica=ppr,
                    pods=effective * ppr, pod=shape, gpus_per_pod=gpu_count(shape.requests, gpu_resources),
                    selector=labels, selector_expressions=expressions)


def _selector(at: _Where, i: int, raw: Any):
    """A podSelector result: a label map, or a LabelSelector {matchLabels, matchExpressions}."""
    try:
        return label_selector_parts(raw)
    except ValueError as e:
        raise at.bad(f"components[{i}].podSelector", at.compiled.definition.components[i].podSelector or "",
                     str(e)) from None


def _pod_shape(at: _Where, row: list[Any], c: Columns, comp: str, instance: str) -> PodShape:
    try:
        return pod_shape(row, c)
    except InputError as e:
        raise at.invalid(f"{comp}/{instance}: {e.message}") from None


def _gangs(at: _Where, raw: Any, instances: Sequence[Instance]) -> Iterable[Gang]:
    """Gangs from the gangs expression's list; an entry with `names` or `namePattern` stands
    for one gang per name with the same members (per-replica gangs, built once in jq and here)."""
    expr = at.compiled.definition.gangs or ""
    if isinstance(raw, dict) and "keyed" in raw:
        try:
            raw = keyed_gangs(raw["keyed"])
        except (TypeError, ValueError) as e:
            raise at.bad("gangs", expr, f"bad keyed gang rows: {type(e).__name__} {e}") from None
    if not isinstance(raw, list):
        raise at.bad("gangs", expr, "expected a list of gangs")
    by_key = {(inst.component, inst.instance): inst for inst in instances} if raw else {}
    made = 0
    for g in raw:
        try:
            names = _gang_names(g)
            members, pods, gpus = [], 0, 0
            for m in g["members"]:
                inst = by_key.get((m["component"], m["instance"]))
                if inst is None:
                    raise KeyError(f"{m['component']}/{m['instance']}")
                n = inst.pods if m.get("pods") is None else int(m["pods"])
                members.append((inst.component, inst.instance, n))
                pods += n
                gpus += n * inst.gpus_per_pod
            min_member = int(g["minMember"]) if g.get("minMember") is not None else pods
            window = int(g["window"]) if g.get("window") is not None else None
        except (KeyError, TypeError, ValueError) as e:
            raise at.bad("gangs", expr, f"bad gang {g!r}: {type(e).__name__} {e}") from None
        frozen = tuple(members)
        made += len(names)
        if made > MAX_GANGS:
            raise at.bad("gangs", expr, f"more than {MAX_GANGS} gangs")
        for gang_name in names:
            yield Gang(name=gang_name, members=frozen, min_member=min_member, pods=pods, gpus=gpus, window=window)


def keyed_gangs(rows: Any) -> list[dict[str, Any]]:
    """`{"keyed": rows}`: rows `[group, [key...], component, instance, pods, min, ...]` (more
    columns are ignored); the rows of one group and key form one gang, named group-key...
    (ASCII lowercased), its members the pods summed per instance, its minMember the mins
    summed; rows without pods are left out. Gangs in (group, key) order, members in (component, instance) order, as jq's
    `group_by` orders them: the grouping costs jq about 15 µs a row, Python about one."""
    gangs: dict[tuple[str, ...], tuple[dict[tuple[str, str], int], list[int]]] = {}
    for row in rows:
        group, key, component, instance, pods, least = row[:6]
        if not pods > 0:
            continue
        found = gangs.get(gk := (group, *key))
        if found is None:
            found = gangs[gk] = ({}, [0])
        members = found[0]
        members[component, instance] = members.get((component, instance), 0) + pods
        found[1][0] += least
    return [{"name": "-".join(gk), "lowercase": True, "minMember": total[0],
             "members": [{"component": c, "instance": i, "pods": n} for (c, i), n in sorted(members.items())]}
            for gk, (members, total) in sorted(gangs.items())]


_NAME_KEYS = ("name", "names", "namePattern")
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _gang_names(g: Mapping[str, Any]) -> list[str]:
    """An entry's gang names: `name`, `names` (a list), or `namePattern` (parts: a string is
    copied, an integer n stands for each index 0..n-1; every combination, leftmost slowest).
    jq spends about a microsecond per `tostring` and per string it joins, so per-replica
    names are cheaper made here. `lowercase: true` lowercases ASCII letters as jq's
    `ascii_downcase` does (which costs jq about 2.5 µs per character)."""
    given = [k for k in _NAME_KEYS if k in g]
    if len(given) != 1:
        raise ValueError(f"give one of {', '.join(_NAME_KEYS)}" + (f", not {' and '.join(given)}" if given else ""))
    if "name" in g:
        names = [str(g["name"])]
    elif "names" in g:
        if not isinstance(g["names"], list):
            raise TypeError("names must be a list")
        names = [str(n) for n in g["names"]]
    else:
        names = _expand(g["namePattern"])
    if g.get("lowercase"):
        names = [n.lower() if n.isascii() else n.translate(_ASCII_LOWER) for n in names]
    return names


def _expand(pattern: Any) -> list[str]:
    if not isinstance(pattern, list):
        raise TypeError("namePattern must be a list of strings and counts")
    total = 1
    for part in pattern:
        if type(part) is int and part >= 0:
            total *= part
        elif not isinstance(part, str):
            raise ValueError(f"namePattern part {part!r} is neither a string nor a count")
    if total > MAX_GANGS:
        raise ValueError(f"namePattern makes more than {MAX_GANGS} gangs")
    names = [""]
    for part in pattern:
        names = [n + part for n in names] if isinstance(part, str) else [n + str(i) for n in names for i in range(part)]
    return names


# --- mutation ----------------------------------------------------------------------

def patch_pod_templates(obj: Mapping[str, Any], catalog: Catalog, patch: Mapping[str, Any],
                        source: str | None = None, *, in_place: bool = False) -> dict[str, Any]:
    """A copy of `obj` with `patch` applied to every instance's pod template:
    labels/annotations/nodeSelector merged, tolerations appended once, schedulerName set.
    Nothing else changes. `in_place`: `obj` itself (a dict the caller owns) is patched and
    returned; every path is checked before the first write, so an error leaves it as it was."""
    unknown = set(patch) - set(PATCH_KEYS)
    if unknown:
        raise InputError(f"pod template patch: unknown keys {sorted(unknown)}; allowed: {', '.join(PATCH_KEYS)}",
                         source=source)
    compiled = definition_for(obj, catalog, source)
    name = object_name(obj)
    per_component = template_paths(compiled, obj, name, source)[:-1]
    writes = []
    for i, rows in enumerate(per_component):
        comp = compiled.definition.components[i]
        for row in rows:
            for key, value in patch.items():
                path = target_path(row, key)
                if path is None or NOT_A_PATH in path:
                    why = "no path for it" if path is None else "an expression that is not a path; add write:"
                    raise EvaluationError(
                        f"cannot write {key}: the definition gives {why}",
                        definition=compiled.name, field=f"components[{i}].pod", expression=comp.name,
                        obj=name, source=source)
                writes.append((path, key, value))
    result = obj if in_place and isinstance(obj, dict) else copy.deepcopy(dict(obj))
    for path, key, value in writes:
        _apply(result, path, key, value)
    return result


def target_path(row: Mapping[str, Any], key: str) -> list[Any] | None:
    """The absolute path a patch key writes to, from the paths program's row."""
    written = row.get(f"f.{key}")
    if written == NOT_A_PATH:
        return [NOT_A_PATH]
    if written is not None:
        return written
    meta = spec = None
    template = row.get("template")
    if isinstance(template, list):
        meta, spec = template + ["metadata"], template + ["spec"]
    else:
        spec = row.get("spec") if isinstance(row.get("spec"), list) else None
        meta = row.get("metadata") if isinstance(row.get("metadata"), list) else None
    parent = meta if key in ("labels", "annotations") else spec
    return None if parent is None else parent + [key]


def _apply(obj: dict, path: list[Any], key: str, value: Any) -> None:
    parent = obj
    for part in path[:-1]:
        nxt = parent[part] if isinstance(parent, list) else parent.get(part)
        if nxt is None:
            nxt = {}
            parent[part] = nxt
        parent = nxt
    last = path[-1]
    current = parent.get(last) if isinstance(parent, dict) else parent[last]
    if key in ("labels", "annotations", "nodeSelector"):
        parent[last] = {**(current or {}), **{str(k): str(v) for k, v in value.items()}}
    elif key == "tolerations":
        merged = list(current or [])
        merged += [t for t in value if t not in merged]
        parent[last] = merged
    else:
        parent[last] = value


def template_paths(compiled: CompiledDefinition, obj: Mapping[str, Any], name: str, source: str | None) -> list[Any]:
    """The paths program's output for `obj`. Each thread remembers its last answer by the
    definition and the object's JSON text: preparing a copy asks twice in a row of an object
    the suspend policy left as it was (the suspend path, then the pod-template patch). Each
    answer is a fresh value (read back from its JSON), whoever changes one."""
    text = json_text(obj)
    last = getattr(_LAST_PATHS, "answer", None)
    if last is not None and last[0] is compiled and last[1] == text:
        return orjson.loads(last[2])
    try:
        found = _first(compiled.paths_program, text)
    except ValueError as e:
        raise EvaluationError(str(e).split("\n")[0], definition=compiled.name, field="paths",
                              expression="path(...)", obj=name, source=source) from None
    try:
        _LAST_PATHS.answer = (compiled, text, orjson.dumps(found))
    except (orjson.JSONEncodeError, TypeError):
        _LAST_PATHS.answer = None
    return found


# per thread: (definition, the object's JSON text, the paths program's answer as JSON)
_LAST_PATHS = threading.local()


def suspend_path(obj: Mapping[str, Any], catalog: Catalog, source: str | None = None) -> list[Any] | None:
    """Where the object's suspend field lives (its definition's `suspend.path`), or None
    when the definition has none."""
    compiled = definition_for(obj, catalog, source)
    if compiled.definition.suspend is None:
        return None
    path = template_paths(compiled, obj, object_name(obj), source)[-1]
    return list(path) if path else None
