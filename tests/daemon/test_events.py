"""placer/events.py against the test API server: Events about an object, not repeated,
counted on across daemon restarts; the Placed condition's shape and transitions."""

from __future__ import annotations

from datetime import datetime, timezone

from placer.daemon.events import Recorder, condition_of, placed_condition, with_condition
from placer.kube import Kube

T0 = datetime(2026, 12, 3, 10, 0, 0, tzinfo=timezone.utc)
T1 = datetime(2026, 12, 3, 10, 5, 0, tzinfo=timezone.utc)


def _obj(ns):
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "train", "namespace": ns, "uid": f"uid-{ns}", "resourceVersion": "7"}}


def test_events_are_recorded_once_and_counted_on_after_a_restart(kube_fleet, kube_ns):
    client = Kube(str(kube_fleet.kubeconfig)).client("alpha")
    obj = _obj(kube_ns)
    first = Recorder(client, lambda: T0, "daemon-1")
    first.record(obj, "Warning", "Unplaced", "unplaced: alpha: needs 8 GPUs")
    first.record(obj, "Warning", "Unplaced", "unplaced: alpha: needs 8 GPUs")      # same as last: nothing new
    [ev] = client.list("events", kube_ns).items
    assert (ev["reason"], ev["type"], ev["count"]) == ("Unplaced", "Warning", 1)
    assert ev["involvedObject"] == {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "namespace": kube_ns,
                                    "uid": f"uid-{kube_ns}", "resourceVersion": "7"}
    assert ev["source"] == {"component": "placer"} and ev["firstTimestamp"] == "2026-12-03T10:00:00Z"
    # a restarted daemon meets the same event: it counts on the existing Event
    Recorder(client, lambda: T1, "daemon-2").record(obj, "Warning", "Unplaced", "unplaced: alpha: needs 8 GPUs")
    [ev] = client.list("events", kube_ns).items
    assert ev["count"] == 2 and ev["lastTimestamp"] == "2026-12-03T10:05:00Z"
    assert ev["firstTimestamp"] == "2026-12-03T10:00:00Z"
    # something else happens, then the first event again: counted, not a new Event
    first.record(obj, "Normal", "Placed", "placed on alpha")
    first.record(obj, "Warning", "Unplaced", "unplaced: alpha: needs 8 GPUs")
    events = {e["reason"]: e for e in client.list("events", kube_ns).items}
    assert set(events) == {"Unplaced", "Placed"} and events["Unplaced"]["count"] == 3


def test_recording_never_raises(fresh_fleet, kube_ns, caplog):
    from placer.kube import RetryPolicy
    client = Kube(str(fresh_fleet.kubeconfig), retry=RetryPolicy(attempts=1, base=0.001, cap=0.002)).client("alpha")
    fresh_fleet["alpha"].faults.fail(403, match="/events")
    Recorder(client, lambda: T0).record(_obj(kube_ns), "Normal", "Placed", "placed on alpha")   # logged only
    assert "event Placed placed on alpha" in caplog.text and "not recorded" in caplog.text


def test_placed_condition_transitions():
    status = {"conditions": [{"type": "Suspended", "status": "True"}]}
    c0 = placed_condition(False, "Unplaced", "unplaced: x", T0)
    s0 = with_condition(status, c0)
    assert [c["type"] for c in s0["conditions"]] == ["Suspended", "Placed"]
    again = placed_condition(False, "Unplaced", "unplaced: y", T1, condition_of(s0))
    assert again["lastTransitionTime"] == "2026-12-03T10:00:00Z"          # same status: time kept
    placed = placed_condition(True, "Placed", "placed on alpha", T1, condition_of(s0))
    assert placed["lastTransitionTime"] == "2026-12-03T10:05:00Z"
    assert with_condition({"phase": "x"}, placed) is None                  # no conditions list: not allowed
    assert with_condition(None, placed) is None
