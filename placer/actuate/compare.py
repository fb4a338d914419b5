"""Comparing a workload or an object with what placer would write: shared by `placer
submit` (re-submitting a placed group) and the daemon (forwarding spec edits, drift)."""

from __future__ import annotations

from typing import Any

from placer.model.workload import Workload


def demand(w: Workload) -> tuple:
    """What placement depends on: per instance, pods, requests and node constraints."""
    return tuple((i.key, i.pods, tuple(sorted(i.pod.requests.items())), tuple(sorted(i.pod.node_selector.items())),
                  repr(i.pod.affinity_terms), repr(i.pod.tolerations)) for i in w.instances)


def contains(have: Any, want: Any) -> bool:
    """Whether `have` holds every field `want` states, with the same value (lists item by
    item): what server-side apply of `want` would leave unchanged."""
    if isinstance(want, dict):
        return isinstance(have, dict) and all(k in have and contains(have[k], v) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(have, list) and len(have) == len(want) and all(map(contains, have, want))
    return have == want or str(have) == str(want)


__all__ = ["contains", "demand"]
