"""Turning a plan into objects on clusters, and reading back what placer already placed.

Shared by `placer submit` and `placer daemon`. Three rooms:

- `prepare` (pure): `prepare_objects` (a clean, labelled, hand-off-patched, un-suspended copy
  of a group for one cluster), `handoff_of`; the labels (`workload_label`, from
  `placer.model.labels`) and `set_suspend`, `planning_view` (`placer.definitions.suspend`) are
  re-exported here;
- `apply` (I/O through `placer.kube`): `apply_group` (server-side apply, all-or-nothing per
  group; `Namespaces` known to exist, for a long-lived caller) and `rollback`;
- `placed`: `find_placed` (every placer-managed workload on every live cluster, concurrently),
  `read_live` (inventory + pods + placed objects in one pass per cluster), and the capacity
  still promised (`promised`, `reserved_by_cluster`).

This package re-exports every name the former module `placer/actuate.py` had: callers use
`from placer import actuate as A; A.apply_group(...)` (and tests patch `actuate.apply_group`).
"""

from placer.actuate.apply import AppliedRef, Namespaces, NotOurs, apply_group, ensure_namespace, rollback
from placer.actuate.generated import MANAGED_BY, strip_generated
from placer.actuate.prepare import (
    SERVER_FIELDS,
    Handoff,
    handoff_of,
    new_plan_id,
    prepare_objects,
    ref_name,
    shares_on,
    strip_server_fields,
)
from placer.definitions.suspend import SUSPEND_KEEP, SUSPEND_OMIT, SUSPEND_UNSUSPEND, planning_view, set_suspend
from placer.fleetview.placed import (
    LiveState,
    Placed,
    PlacedRef,
    client_for,
    find_placed,
    index_placed,
    instance_pods,
    managed_objects,
    outstanding,
    promised,
    read_cluster_state,
    read_live,
    reserved_by_cluster,
)
from placer.model.labels import MANAGED_SELECTOR, cluster_label, label_value, legacy_workload_label, workload_label
from placer.model.names import GROUP, MANAGED, ORIGIN, PLACED_CLUSTER, PLAN, SHARED, WORKLOAD

__all__ = [
    # names (placer.model.names)
    "GROUP", "MANAGED", "ORIGIN", "PLACED_CLUSTER", "PLAN", "SHARED", "WORKLOAD",
    # prepare
    "MANAGED_BY", "MANAGED_SELECTOR", "SERVER_FIELDS", "SUSPEND_KEEP", "SUSPEND_OMIT", "SUSPEND_UNSUSPEND", "Handoff",
    "cluster_label", "handoff_of", "label_value", "legacy_workload_label", "new_plan_id", "planning_view", "shares_on",
    "prepare_objects", "ref_name", "set_suspend", "strip_generated", "strip_server_fields",
    "workload_label",
    # apply
    "AppliedRef", "Namespaces", "NotOurs", "apply_group", "ensure_namespace", "rollback",
    # placed
    "LiveState", "Placed", "PlacedRef", "client_for", "find_placed", "index_placed", "instance_pods", "managed_objects",
    "outstanding", "promised",
    "read_cluster_state", "read_live", "reserved_by_cluster",
]
