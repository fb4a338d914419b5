"""Resource names and amounts as the clusters file writes them (nodes and quotas)."""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Any

from pydantic import AfterValidator

from placer.model.errors import InputError
from placer.model.quantity import canonical

_NATIVE = {"cpu", "memory", "pods", "ephemeral-storage"}


# GPU resource names as device plugins advertise them. A name one or two edits away from one
# of these (`nvidia.com/gpus`, `nvidia.com/GPU`, `nvidia.con/gpu`) is a typo that would count
# no GPUs at all; other extended resources (MIG slices, `nvidia.com/gpu.shared`, RDMA) are
# legitimate and far from these.
KNOWN_GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu", "gpu.intel.com/i915", "gpu.intel.com/xe", "habana.ai/gaudi")


def _edits(a: str, b: str) -> int:
    """Levenshtein distance."""
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def _gpu_typo(name: str) -> str | None:
    """The known GPU resource name `name` is a near miss of, if any."""
    if name in KNOWN_GPU_RESOURCES:
        return None
    return next((k for k in KNOWN_GPU_RESOURCES if _edits(name.lower(), k) <= 2), None)


@lru_cache(maxsize=1024)       # a fleet written node by node repeats the same few names (issue 24)
def _resource_name(name: str) -> str:
    meant = _gpu_typo(name)
    if meant:
        raise ValueError(f"unknown resource {name!r}: did you mean {meant}? (a near miss of a GPU resource "
                         "name would count no GPUs)")
    if name in _NATIVE or name.startswith("hugepages-") or "/" in name:
        return name
    raise ValueError(f"unknown resource {name!r}: use cpu, memory, pods, ephemeral-storage, "
                     "hugepages-<size> or a domain-prefixed name such as nvidia.com/gpu")


# Bounds that keep every sum the solver forms within CP-SAT's 64-bit integers
# (MAX_NODES x MAX_AMOUNT < 2^63) and far above any real node (32 TiB, 35 billion GPUs).
MAX_AMOUNT = 2**45
MAX_GROUP_NODES = 100_000
MAX_NODES = 200_000


def _quantity_map(value: dict[str, Any]) -> dict[str, Any]:
    for name, q in value.items():
        try:
            amount = canonical(name, q)
        except InputError as e:
            raise ValueError(f"{name}: {e.message}") from None
        if not 0 <= amount <= MAX_AMOUNT:
            raise ValueError(f"{name}: {q!r} is out of range (0 to {MAX_AMOUNT} per node)")
    return value


ResourceName = Annotated[str, AfterValidator(_resource_name)]
Resources = Annotated[dict[ResourceName, int | float | str], AfterValidator(_quantity_map)]
