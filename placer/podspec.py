"""What one pod asks of a node, computed from a PodSpec as the kube-scheduler does."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from .quantity import add, canonical

DEFAULT_GPU_RESOURCES = ("nvidia.com/gpu",)


def container_requests(container: Mapping[str, Any]) -> dict[str, int]:
    """A container's requests; a resource with only a limit requests its limit
    (the API server defaults requests from limits)."""
    resources = container.get("resources") or {}
    # requests after limits, so they win; a null quantity is none (mapped vendor structs leave gaps)
    merged = {k: v for part in ("limits", "requests") for k, v in (resources.get(part) or {}).items()
              if v is not None}
    return {name: canonical(name, v) for name, v in merged.items()}


def _max_into(into: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        if v > into.get(k, 0):
            into[k] = v


def effective_requests(containers: Iterable[Mapping[str, Any]],
                       init_containers: Iterable[Mapping[str, Any]] = (),
                       overhead: Mapping[str, Any] | None = None) -> dict[str, int]:
    """Per resource: max(sum over app containers + sidecars, each init container plus the
    sidecars started before it), plus pod overhead. Sidecars are init containers with
    restartPolicy Always (they keep running next to the app containers)."""
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
    if overhead:
        add(total, {k: canonical(k, v) for k, v in overhead.items()})
    return {k: v for k, v in total.items() if v}


def pod_requests(spec: Mapping[str, Any] | None) -> dict[str, int]:
    spec = spec or {}
    return effective_requests(spec.get("containers") or (), spec.get("initContainers") or (),
                              spec.get("overhead"))


def gpu_count(requests: Mapping[str, int], gpu_resources: Iterable[str] = DEFAULT_GPU_RESOURCES) -> int:
    return sum(requests.get(name, 0) for name in gpu_resources)
