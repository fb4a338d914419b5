"""What one pod asks of a node, computed from a PodSpec as the kube-scheduler does."""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from placer.model.errors import InputError
from placer.model.quantity import add, canonical

DEFAULT_GPU_RESOURCES = ("nvidia.com/gpu",)


def container_requests(container: Mapping[str, Any]) -> dict[str, int]:
    """A container's requests; a resource with only a limit requests its limit
    (the API server defaults requests from limits)."""
    resources = container.get("resources") or {}
    # requests after limits, so they win; a null quantity is none (mapped vendor structs leave gaps)
    merged = {k: v for part in ("limits", "requests") for k, v in (resources.get(part) or {}).items()
              if v is not None}
    out = {name: canonical(name, v) for name, v in merged.items()}
    for name, amount in out.items():
        if amount < 0:      # the API server rejects it; summed, it would hide other containers' requests
            raise InputError(f"container {container.get('name') or '?'}: resources {name}: "
                             f"must not be negative, got {merged[name]!r}")
    return out


def _max_into(into: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        if v > into.get(k, 0):
            into[k] = v


# what pod-level resources (spec.resources) may set; they replace the containers' total
POD_LEVEL_RESOURCES = frozenset({"cpu", "memory"})


def effective_requests(containers: Iterable[Mapping[str, Any]],
                       init_containers: Iterable[Mapping[str, Any]] = (),
                       overhead: Mapping[str, Any] | None = None,
                       pod_level: Mapping[str, Any] | None = None) -> dict[str, int]:
    """Per resource: max(sum over app containers + sidecars, each init container plus the
    sidecars started before it), replaced by the pod-level request (spec.resources) where
    one is set for cpu or memory, plus pod overhead: the scheduler's PodRequests. Sidecars
    are init containers with restartPolicy Always (they keep running next to the app containers)."""
    total: dict[str, int] = {}
    for c in containers or ():
        add(total, container_requests(c))
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for c in init_containers or ():
        req = container_requests(c)
        if c.get("restartPolicy") == "Always":
            add(sidecars, req)
            _max_into(init_peak, sidecars)
        else:
            _max_into(init_peak, add(dict(sidecars), req))
    add(total, sidecars)
    _max_into(total, init_peak)
    if pod_level:
        for k, v in container_requests({"resources": pod_level}).items():
            if k in POD_LEVEL_RESOURCES:
                total[k] = v
    if overhead:
        extra = {k: canonical(k, v) for k, v in overhead.items()}
        negative = next((k for k, v in extra.items() if v < 0), None)
        if negative:
            raise InputError(f"overhead {negative}: must not be negative, got {overhead[negative]!r}")
        add(total, extra)
    return {k: v for k, v in total.items() if v}


def pod_requests(spec: Mapping[str, Any] | None) -> dict[str, int]:
    spec = spec or {}
    return effective_requests(spec.get("containers") or (), spec.get("initContainers") or (),
                              spec.get("overhead"), spec.get("resources"))


def gpu_count(requests: Mapping[str, int], gpu_resources: Iterable[str] = DEFAULT_GPU_RESOURCES) -> int:
    return sum(requests.get(name, 0) for name in gpu_resources)


# --- type checks: what the API server would reject, named for the user -----------------

SEQUENCES = (list, tuple)
_KINDS = {dict: "a map", list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number"}


def value_kind(v: Any) -> str:
    """A wrong value for an error message: its JSON type and the start of its text."""
    return f"{_KINDS.get(type(v), type(v).__name__)} {str(v)[:40]!r}"


_NODE_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})
_TOLERATION_OPERATORS = frozenset({"", "Exists", "Equal"})
_REQUIRED_TERMS = "pod spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"


def constraint_problem(node_selector: dict, terms: Sequence[Any], tolerations: Sequence[Any]) -> str | None:
    """What the API server would reject in the pod's node constraints, and the scheduler
    code would misread: non-string selector values, malformed tolerations and terms."""
    for k, v in node_selector.items():
        if type(v) is not str:
            return f"pod spec.nodeSelector.{k}: expected a string, got {value_kind(v)}"
    for i, t in enumerate(tolerations):
        problem = _toleration_problem(f"pod spec.tolerations[{i}]", t)
        if problem:
            return problem
    for i, term in enumerate(terms):
        problem = _term_problem(f"{_REQUIRED_TERMS}[{i}]", term)
        if problem:
            return problem
    return None


def _toleration_problem(at: str, t: Any) -> str | None:
    if type(t) is not dict:
        return f"{at}: expected a map, got {value_kind(t)}"
    for f in ("key", "operator", "value", "effect"):
        if t.get(f) is not None and type(t[f]) is not str:
            return f"{at}.{f}: expected a string, got {value_kind(t[f])}"
    if (t.get("operator") or "") not in _TOLERATION_OPERATORS:
        return f"{at}.operator: expected Exists or Equal, got {t['operator']!r}"
    return None


def _term_problem(where: str, term: Any) -> str | None:
    """One nodeSelectorTerm: a map whose matchExpressions and matchFields are lists of requirements."""
    if type(term) is not dict:
        return f"{where}: expected a map, got {value_kind(term)}"
    for part in ("matchExpressions", "matchFields"):
        exprs = term.get(part)
        if exprs is not None and type(exprs) not in SEQUENCES:
            return f"{where}.{part}: expected a list, got {value_kind(exprs)}"
        for j, e in enumerate(exprs or ()):
            problem = _requirement_problem(f"{where}.{part}[{j}]", e)
            if problem:
                return problem
    return None


def _requirement_problem(at: str, e: Any) -> str | None:
    if type(e) is not dict:
        return f"{at}: expected a map, got {value_kind(e)}"
    if type(e.get("key")) is not str:
        return f"{at}.key: expected a string, got {value_kind(e.get('key'))}"
    if e.get("operator") not in _NODE_OPERATORS:
        return f"{at}.operator: expected one of {', '.join(sorted(_NODE_OPERATORS))}, got {e.get('operator')!r}"
    values = e.get("values")
    if values is not None and (type(values) not in SEQUENCES or any(type(v) is not str for v in values)):
        return f"{at}.values: expected a list of strings, got {value_kind(values)}"
    return None


def shape_problem(spec: Any, meta: Any, resources: Any = None) -> str:
    """Name the first pod field whose type is wrong: the slow path, after reading the pod
    failed. `resources` is a definition's fragmented `resources` field (merged into the main
    container); node constraints inside well-typed fields are `constraint_problem`'s."""
    def want(path: str, v: Any, types: tuple[type, ...], what: str) -> str | None:
        return None if v is None or type(v) in types else f"pod {path}: expected {what}, got {value_kind(v)}"

    checks: list[tuple[str, Any, tuple[type, ...], str]] = [
        ("spec", spec, (dict,), "a map"), ("metadata", meta, (dict,), "a map"),
        ("resources", resources, (dict,), "a map")]
    if isinstance(resources, dict):
        checks += [(f"resources.{part}", resources.get(part), (dict,), "a map") for part in ("requests", "limits")]
    spec = spec if isinstance(spec, dict) else {}
    meta = meta if isinstance(meta, dict) else {}
    checks += [(f"metadata.{k}", meta.get(k), (dict,), "a map") for k in ("labels", "annotations")]
    checks += [(f"spec.{k}", spec.get(k), (dict,), "a map")
               for k in ("nodeSelector", "affinity", "overhead", "resources")]
    if isinstance(spec.get("resources"), dict):
        checks += [(f"spec.resources.{part}", spec["resources"].get(part), (dict,), "a map")
                   for part in ("requests", "limits")]
    checks += [(f"spec.{k}", spec.get(k), SEQUENCES, "a list") for k in ("containers", "initContainers", "tolerations")]
    checks += [(f"spec.{k}", spec.get(k), (str,), "a string")
               for k in ("schedulerName", "priorityClassName", "runtimeClassName")]
    for k in ("containers", "initContainers"):
        items = spec.get(k)
        for i, item in enumerate(items if isinstance(items, SEQUENCES) else ()):
            checks.append((f"spec.{k}[{i}]", item, (dict,), "a map"))
            res = item.get("resources") if isinstance(item, dict) else None
            checks.append((f"spec.{k}[{i}].resources", res, (dict,), "a map"))
            if isinstance(res, dict):
                for part in ("requests", "limits"):
                    checks.append((f"spec.{k}[{i}].resources.{part}", res.get(part), (dict,), "a map"))
    affinity = spec.get("affinity") if isinstance(spec.get("affinity"), dict) else {}
    node = affinity.get("nodeAffinity")
    checks.append(("spec.affinity.nodeAffinity", node, (dict,), "a map"))
    required = node.get("requiredDuringSchedulingIgnoredDuringExecution") if isinstance(node, dict) else None
    checks.append(("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution", required,
                   (dict,), "a map"))
    if isinstance(required, dict):
        checks.append(("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
                       ".nodeSelectorTerms", required.get("nodeSelectorTerms"), SEQUENCES, "a list"))
    for check in checks:
        problem = want(*check)
        if problem:
            return problem
    return "malformed pod template"
