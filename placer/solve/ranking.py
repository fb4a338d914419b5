"""How a group ranks the fleet's clusters (issue 21), and their costs as integers: the
inputs of placer.solve.preference, worked out once when the problem is prepared."""

from __future__ import annotations

from decimal import Decimal
from math import gcd
from typing import Sequence

from placer.model.fleet import Cluster


def ranks_of(order: Sequence[str], clusters: Sequence[Cluster]) -> tuple[int, ...]:
    """Per cluster index, the group's rank of it (0 first): the order's position, then
    the cluster's preference (higher first); equal keys share a rank."""
    pos = {name: i for i, name in enumerate(order)}
    keys = [(pos.get(cl.name, len(order)), -cl.preference) for cl in clusters]
    dense = {k: r for r, k in enumerate(sorted(set(keys)))}
    return tuple(dense[k] for k in keys)


def costed(clusters: Sequence[Cluster]) -> bool:
    """Whether the fleet gives any cost (then every placement has one)."""
    return any(cl.cost is not None for cl in clusters)


def cost_units(clusters: Sequence[Cluster]) -> list[int]:
    """Each cluster's cost per GPU-hour as an integer in a common unit (all 0 without costs)."""
    costs = [cl.cost or Decimal(0) for cl in clusters]
    places = max((max(0, -int(c.as_tuple().exponent)) for c in costs), default=0)
    units = [int(c.scaleb(places)) for c in costs]
    g = 0
    for u in units:
        g = gcd(g, u)
    return [u // g for u in units] if g > 1 else units


def ordered(eligible: Sequence[int], ranks: Sequence[int], units: Sequence[int]) -> list[int]:
    """Eligible clusters in preference order (rank, then cost, then file order): the greedy
    plans, the repair and the decoder fill them in that order."""
    return sorted(eligible, key=lambda c: (ranks[c], units[c], c))
