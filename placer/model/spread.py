"""Spread policy from annotations: `placer.dev/spread: duplicate|divide` and its companions,
parsed strictly (a bad value is one line naming the annotation and the workload, exit 2)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

from placer.model.errors import InputError
from placer.model.names import ANN_SPREAD, ANN_SPREAD_CLUSTERS, ANN_SPREAD_MIN_REPLICAS, ANN_SPREAD_WEIGHTS

DUPLICATE, DIVIDE = "duplicate", "divide"


@dataclass(frozen=True)
class Spread:
    """`duplicate`: a full copy on each eligible cluster, or on exactly `clusters` of them, all
    or none. `divide`: the scalable replicas split into shares of whole units; `weights`
    (cluster, weight): only those clusters, each share within one replica of its weight as far
    as the nodes allow; at most `clusters`
    clusters; placed only when at least `min_replicas` land (default: all of them)."""

    mode: str
    clusters: int | None = None
    weights: tuple[tuple[str, int], ...] = ()
    min_replicas: int | None = None


def _positive(ann: Mapping[str, str], name: str, fail) -> int | None:
    if name not in ann:
        return None
    text = str(ann[name]).strip()
    if not re.fullmatch(r"[0-9]+", text) or int(text) < 1:
        fail(f"annotation {name}: {ann[name]!r} is not a positive integer")
    return int(text)


def _weights(ann: Mapping[str, str], fail) -> tuple[tuple[str, int], ...]:
    text = str(ann.get(ANN_SPREAD_WEIGHTS, "")).strip()
    if ANN_SPREAD_WEIGHTS not in ann:
        return ()
    out: dict[str, int] = {}
    for item in text.split(","):
        m = re.fullmatch(r"\s*([^=\s]+)\s*=\s*([0-9]+)\s*", item)
        if not m or int(m[2]) < 1 or m[1] in out:
            fail(f"annotation {ANN_SPREAD_WEIGHTS}: {item.strip()!r} in {text!r} is not cluster=weight "
                 "(a positive integer, each cluster once)")
        else:
            out[m[1]] = int(m[2])
    return tuple(out.items())


def spread_of(annotations: Mapping[str, str], obj: str, source: str | None = None) -> Spread | None:
    """The workload's spread policy, None without `placer.dev/spread`."""
    def fail(msg: str) -> None:
        raise InputError(msg, obj=obj, source=source)

    ann = annotations or {}
    extras = [n for n in (ANN_SPREAD_CLUSTERS, ANN_SPREAD_WEIGHTS, ANN_SPREAD_MIN_REPLICAS) if n in ann]
    if ANN_SPREAD not in ann:
        if extras:
            fail(f"annotation {extras[0]} needs {ANN_SPREAD}: duplicate or divide")
        return None
    mode = str(ann[ANN_SPREAD]).strip()
    if mode not in (DUPLICATE, DIVIDE):
        fail(f"annotation {ANN_SPREAD}: {ann[ANN_SPREAD]!r} is not duplicate or divide")
    clusters = _positive(ann, ANN_SPREAD_CLUSTERS, fail)
    min_replicas = _positive(ann, ANN_SPREAD_MIN_REPLICAS, fail)
    weights = _weights(ann, fail)
    if mode == DUPLICATE and (weights or min_replicas is not None):
        fail(f"annotation {ANN_SPREAD_WEIGHTS if weights else ANN_SPREAD_MIN_REPLICAS} applies to "
             f"{ANN_SPREAD}: divide, not duplicate")
    return Spread(mode, clusters, weights, min_replicas)
