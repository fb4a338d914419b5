"""Kubernetes resource quantities, parsed exactly.

Inside placer every amount is an int in a canonical unit: CPU in millicores, everything
else (memory in bytes, GPUs, pods, extended resources) in whole units. Values are
rounded up, as the scheduler does, so a request is never under-counted.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache
from typing import Any, Mapping

from placer.model.errors import InputError

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL: dict[str, Fraction | int] = {"n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": 1,
            "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$")

MILLI_RESOURCES = frozenset({"cpu"})


def parse_quantity(value: Any) -> Fraction:
    """Parse a quantity (`500m`, `1Gi`, `2e3`, 4, 0.5) to an exact Fraction."""
    if isinstance(value, bool):
        raise InputError(f"invalid quantity {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InputError(f"invalid quantity {value!r}")
        return Fraction(str(value))
    if not isinstance(value, str):
        raise InputError(f"invalid quantity {value!r}")
    m = _QUANTITY.match(value.strip())
    if not m:
        raise InputError(f"invalid quantity {value!r}")
    number, exponent, suffix = m.groups()
    base = Fraction(number)
    if exponent:
        return base * Fraction(10) ** int(exponent[1:])
    suffix = suffix or ""
    return base * (_BINARY.get(suffix) or _DECIMAL[suffix])


def canonical(resource: str, value: Any) -> int:
    """A quantity as a canonical int: millicores for CPU, whole units (rounded up) else."""
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        return _canonical_cached(resource in MILLI_RESOURCES, value)
    return _canonical(resource in MILLI_RESOURCES, value)


@lru_cache(maxsize=8192)   # manifests repeat the same few quantities; Fraction math is slow
def _canonical_cached(milli: bool, value: str | int) -> int:
    return _canonical(milli, value)


def _canonical(milli: bool, value: Any) -> int:
    q = parse_quantity(value)
    if milli:
        q *= 1000
    return math.ceil(q)


def to_json_number(resource: str, amount: int) -> int | float:
    """Canonical amount as a JSON number in the resource's natural unit (CPU in cores)."""
    if resource in MILLI_RESOURCES:
        return amount // 1000 if amount % 1000 == 0 else amount / 1000
    return amount


def format_quantity(resource: str, amount: int) -> str:
    """Human form: `500m`, `2`, `16Gi`."""
    if resource in MILLI_RESOURCES:
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if amount >= 2**10 and ("memory" in resource or "storage" in resource or "hugepages" in resource):
        for suffix, factor in reversed(_BINARY.items()):
            if amount % factor == 0:
                return f"{amount // factor}{suffix}"
    return str(amount)


def add(into: dict[str, int], other: Mapping[str, int], times: int = 1) -> dict[str, int]:
    for k, v in other.items():
        into[k] = into.get(k, 0) + v * times
    return into
