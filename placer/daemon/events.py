"""What the daemon tells users on the hub: Events on staging objects and a `Placed` condition.

`kubectl describe` on a staging object then tells the story: Placed (where, by which
plan), Unplaced (with the reason), Rescheduled (withdrawn from a cluster, and why),
Failed (the copy could not be created, or the object is invalid), ClusterDegraded (its
create got no answer within the request deadline: moved elsewhere), LateCopyDeleted (a
copy such a create committed after all, deleted once that cluster answered). Events are core/v1
Events in the object's namespace, reported by component `placer`; the same event again
(same object, reason and message) is counted on the existing Event rather than repeated,
as kubelet's recorder does. Recording is best effort: a failure is logged, never raised.

The `Placed` condition (metav1.Condition shape) goes into the staging object's status
when that status keeps a `conditions` list (the type's own status allows it).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from datetime import datetime, timezone
from typing import Any, Callable, Mapping

from placer.model.errors import Conflict, NotFound, PlacerError

log = logging.getLogger("placer.daemon.events")

COMPONENT = "placer"
NORMAL, WARNING = "Normal", "Warning"
PLACED, UNPLACED, RESCHEDULED, FAILED = "Placed", "Unplaced", "Rescheduled", "Failed"
CLUSTER_DEGRADED, LATE_COPY_DELETED = "ClusterDegraded", "LateCopyDeleted"   # a target that hung (daemon/health.py)
CONDITION = "Placed"
MAX_MESSAGE = 1024                      # the API server's limit on Event.message


def _stamp(at: datetime) -> str:
    return at.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def event_name(obj: Mapping[str, Any], reason: str, message: str) -> str:
    """Stable per (object, reason, message): the same event again lands on the same Event."""
    meta = obj.get("metadata") or {}
    digest = hashlib.sha256(f"{meta.get('uid')}/{reason}/{message}".encode()).hexdigest()[:10]
    return f"{meta.get('name')}.{digest}"[:253]


def event_body(obj: Mapping[str, Any], type_: str, reason: str, message: str, at: datetime,
               instance: str = "") -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": event_name(obj, reason, message), "namespace": meta.get("namespace") or "default"},
        "involvedObject": {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"), "name": meta.get("name"),
                           "namespace": meta.get("namespace"), "uid": meta.get("uid"),
                           "resourceVersion": meta.get("resourceVersion")},
        "type": type_, "reason": reason, "message": message[:MAX_MESSAGE],
        "source": {"component": COMPONENT}, "reportingComponent": COMPONENT, "reportingInstance": instance,
        "firstTimestamp": _stamp(at), "lastTimestamp": _stamp(at), "count": 1,
    }


class Recorder:
    """Records Events through a placer.kube client. `now`: the injected clock's wall time."""

    def __init__(self, client: Any, now: Callable[[], datetime], instance: str = ""):
        self.client, self.now, self.instance = client, now, instance
        self._seen: set[str] = set()                    # Events this recorder created or counted on
        self._last: dict[str, str] = {}                 # object -> name of its last event
        self._lock = threading.Lock()

    def record(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        """Record an event; the same one as this object's last is not repeated (a planning
        round that finds the object still unplaced for the same reason says nothing new).
        An event seen before (by this daemon or an earlier one) is counted on its Event,
        from the count the server holds; one the server has expired is created anew."""
        body = event_body(obj, type_, reason, message, self.now(), self.instance)
        name, ns = body["metadata"]["name"], body["metadata"]["namespace"]
        meta = obj.get("metadata") or {}
        who = meta.get("uid") or f"{ns}/{meta.get('name')}"
        with self._lock:
            if self._last.get(who) == name:
                return
            self._last[who] = name
            seen = name in self._seen
            self._seen.add(name)
        try:
            if not seen and self._create(body):
                return
            try:
                old = self.client.get("events", name, ns)
            except NotFound:                               # expired meanwhile (Events live about an hour)
                self._create(body)
                return
            self.client.patch("events", name, {"count": int(old.get("count") or 1) + 1,
                                               "lastTimestamp": body["lastTimestamp"]}, ns)
        except PlacerError as e:
            log.warning("event %s %s on %s/%s not recorded: %s", reason, message[:80], ns, meta.get("name"), e)

    def _create(self, body: Mapping[str, Any]) -> bool:
        """Create the Event; False when it exists already."""
        try:
            self.client.create("events", body, body["metadata"]["namespace"])
            return True
        except Conflict:
            return False


def placed_condition(placed: bool, reason: str, message: str, at: datetime,
                     previous: Mapping[str, Any] | None = None, generation: int | None = None,
                     type_: str = CONDITION) -> dict[str, Any]:
    """The `Placed` condition (or another of placer's: `Preempted`); its transition time moves
    only when its status changes."""
    status = "True" if placed else "False"
    since = (previous or {}).get("lastTransitionTime") if (previous or {}).get("status") == status else None
    out = {"type": type_, "status": status, "reason": reason, "message": message[:MAX_MESSAGE],
           "lastTransitionTime": since or _stamp(at)}
    if generation is not None:
        out["observedGeneration"] = generation
    return out


def with_condition(status: Mapping[str, Any] | None, condition: Mapping[str, Any]) -> dict[str, Any] | None:
    """`status` with the condition set in its `conditions` list; None when the status keeps
    no such list (the type's status does not allow it)."""
    conditions = (status or {}).get("conditions")
    if not isinstance(conditions, list):
        return None
    kind = condition.get("type", CONDITION)
    rest = [c for c in conditions if not (isinstance(c, dict) and c.get("type") == kind)]
    return {**dict(status or {}), "conditions": rest + [dict(condition)]}


def condition_of(status: Mapping[str, Any] | None, type_: str = CONDITION) -> dict[str, Any] | None:
    for c in (status or {}).get("conditions") or ():
        if isinstance(c, dict) and c.get("type") == type_:
            return c
    return None
