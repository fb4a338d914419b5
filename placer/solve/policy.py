"""Policy: priority, pins and cluster selectors from annotations, placer's own exclusions and
group pin from the PlacementGroup, and the reasons they give."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Mapping

from placer.model import reasons as R
from placer.model.errors import InputError
from placer.model.fleet import Cluster
from placer.model.names import ANN_CLUSTER_ORDER, ANN_PIN, ANN_PRIORITY, ANN_SELECTOR
from placer.model.selectors import Requirement, parse_label_selector, selector_matches
from placer.model.workload import PlacementGroup


@dataclass(frozen=True)
class Policy:
    priority: int
    pin: str | None
    pins: tuple[tuple[str, str], ...]                      # (workload, cluster) as annotated
    selectors: tuple[tuple[str, tuple[Requirement, ...]], ...]
    excluded: frozenset[str] = frozenset()                 # placer's own, typed (PlacementGroup)
    order: tuple[str, ...] = ()                            # placer.dev/cluster-order: filled in this order

    @cached_property
    def conflicting(self) -> bool:
        return len({c for _, c in self.pins}) > 1

    @cached_property
    def open(self) -> bool:
        """No pin, selector or exclusion: every reachable cluster passes (prepare asks for each
        of thousands of groups on each of a hundred clusters; issue 24)."""
        return not self.pins and not self.selectors and not self.excluded


def group_policy(group: PlacementGroup) -> Policy:
    """A group takes the strictest of its workloads: the highest priority, every selector,
    the pin they agree on."""
    priority, pins, selectors = None, [], []
    for w in group.workloads:
        ann = w.annotations or {}
        if ANN_PRIORITY in ann:
            try:
                p = int(str(ann[ANN_PRIORITY]).strip())
            except ValueError:
                raise InputError(f"annotation {ANN_PRIORITY}: {ann[ANN_PRIORITY]!r} is not an integer",
                                 obj=w.key, source=w.source) from None
            priority = p if priority is None else max(priority, p)
        if ann.get(ANN_PIN):
            pins.append((w.key, str(ann[ANN_PIN]).strip()))
        if ann.get(ANN_SELECTOR):
            text = str(ann[ANN_SELECTOR]).strip()
            try:
                selectors.append((text, parse_label_selector(text)))
            except InputError as e:
                raise InputError(f"annotation {ANN_SELECTOR}: {e.message}", obj=w.key, source=w.source) from None
    order = _cluster_order(group)
    if group.pin:                     # the group's pin stands for every workload's own
        pins = [(w.key, group.pin) for w in group.workloads]
    pin = pins[0][1] if pins and len({c for _, c in pins}) == 1 else None
    return Policy(priority or 0, pin, tuple(pins), tuple(dict.fromkeys(selectors)), group.excluded, order)


def parse_cluster_order(text: str) -> tuple[str, ...]:
    """`"a, b,c"` -> ("a", "b", "c"): names in order, blanks and repeats dropped."""
    return tuple(dict.fromkeys(n.strip() for n in str(text).split(",") if n.strip()))


def unknown_order_names(groups, clusters) -> list[str]:
    """One note per workload whose cluster order names a cluster the fleet lacks: such names are
    skipped, so that the same object still places while a cluster is down, renamed or not in
    this fleet (a pin, `placer.dev/cluster`, is the way to insist on one)."""
    names = {cl.name for cl in clusters}
    out = []
    for g in groups:
        for w in g.workloads:
            missing = [n for n in parse_cluster_order((w.annotations or {}).get(ANN_CLUSTER_ORDER) or "")
                       if n not in names]
            if missing:
                out.append(f"{w.key}: {ANN_CLUSTER_ORDER} names {', '.join(missing)}, not in the fleet; "
                           "ordering the clusters it names that are")
    return out


def _cluster_order(group: PlacementGroup) -> tuple[str, ...]:
    """The group's cluster order: the one its workloads give (they must agree)."""
    found: tuple[str, ...] | None = None
    for w in group.workloads:
        text = (w.annotations or {}).get(ANN_CLUSTER_ORDER)
        if text is None:
            continue
        order = parse_cluster_order(text)
        if not order:
            raise InputError(f"annotation {ANN_CLUSTER_ORDER}: {text!r} names no cluster (e.g. \"east,west\")",
                             obj=w.key, source=w.source)
        if found is not None and order != found:
            raise InputError(f"annotation {ANN_CLUSTER_ORDER}: {text!r} differs from {','.join(found)!r} given "
                             f"by another workload of its placement group {group.key}", obj=w.key, source=w.source)
        found = order
    return found or ()


def policy_reason(g, cl: Cluster, names: Mapping[str, int]) -> R.Reason | None:
    """Why the group's policy keeps it off the cluster (None: it does not)."""
    pol = g.policy
    if pol.open:
        return None if cl.reachable else R.Unreachable(cl.error or "unknown error")
    if pol.conflicting:
        return R.ConflictingPins(pol.pins)
    if pol.pin is not None:
        if pol.pin not in names:
            return R.UnknownPin(pol.pin)
        if pol.pin != cl.name:
            return R.PinnedElsewhere(pol.pin)
    for text, reqs in pol.selectors:
        if not selector_matches(reqs, cl.labels):
            return R.ExcludedBySelector(text)
    if cl.name in pol.excluded:
        return R.Excluded()
    if not cl.reachable:
        return R.Unreachable(cl.error or "unknown error")
    return None

