"""Found by benchmarks/quotas.py (issue 23, Must-show 3): a higher-priority workload that its
quota keeps out holds back a lower-priority workload of the same quota that fits the quota and
the fleet; the plan placed nothing and was called `feasible`. Strict priority (docs/planning.md,
"After priority") says no higher priority is left out to place a lower one, not that a lower
one waits while a higher one cannot be placed at all. The cause was the repair: the higher
priority displaced the lower one on capacity alone, and the final quota trim then dropped the
higher one too. A displacement now happens only where the quota has room for it."""
from __future__ import annotations

import dataclasses

from placer.model.quota import Quota, Quotas
from placer.solve import solve
from tests.builders import GPU, fleet, groups, wl


def quota_fleet():
    """16 free GPUs; quota d: nominal 8, may borrow 4 (at most 12), already holds 10 elsewhere."""
    q = Quotas((Quota("d", {GPU: 8}, namespaces=frozenset({"d"}), borrowing_limit={GPU: 4}, cohort="lab"),),
               counted={"d": {GPU: 10}})
    return dataclasses.replace(fleet("east: 2x8"), quotas=q)


def test_equal_priorities_place_what_fits_the_quota():
    plan = solve(quota_fleet(), groups(wl("d/small", "1x2"), wl("d/big", "1x8")), time_limit=10)
    assert plan.cluster_of("d/small") == "east" and plan.cluster_of("d/big") is None


def test_a_higher_priority_over_its_quota_does_not_hold_back_a_lower_one_that_fits():
    plan = solve(quota_fleet(), groups(wl("d/small", "1x2"), wl("d/big", "1x8", prio=100)), time_limit=10)
    assert plan.cluster_of("d/big") is None                     # 10 + 8 > 12: over its quota
    assert plan.cluster_of("d/small") == "east"                 # 10 + 2 = 12: within it
