"""Every action the daemon's decisions return, as data, with no API server: the pure steps
in placer.daemon.decide, one staging workload at a time (the planning round's Create and
Unplace have their own tests in test_daemon_decide.py)."""

from __future__ import annotations

import queue
from types import SimpleNamespace

from placer.daemon import decide as DC
from placer.daemon.actions import Annotate, Condition, Create, Delete, ForwardSpec, MirrorStatus, Record, Unplace
from placer.daemon.clock import FakeClock
from placer.daemon.executor import Executor
from placer.daemon.informer import WorkQueue
from placer.daemon.state import Book, Pending
from placer.daemon.targets import Targets
from placer.daemon.view import StagingView
from placer.model.names import ANN_MESSAGE, ANN_PHASE, PLACED_CLUSTER
from tests.builders import fleet, group, wl

REF = wl("ml/train", "1x8").ref


def test_a_round_returns_only_creates_and_unplaces_with_their_reasons():
    a, b = wl("ml/a", "1x8"), wl("ml/b", "2x8")
    d = DC.decide(DC.Snapshot(fleet("east: 1x8")), [DC.PendingGroup(group(a), (a.ref,)),
                                                    DC.PendingGroup(group(b), (b.ref,))], now=0.0, plan_id="p")
    [create, unplace] = d.actions
    assert isinstance(create, Create) and create.cluster == "east" and create.members == (a.ref,)
    assert isinstance(unplace, Unplace) and unplace.ref == b.ref and unplace.reason.startswith("unplaced: east: ")


def test_a_staging_object_gone_deletes_every_copy():
    assert DC.staging_gone(REF, ["east", "west"]) == (
        Delete("east", REF, "its staging object is gone"), Delete("west", REF, "its staging object is gone"))
    assert DC.staging_gone(REF, []) == ()


def test_of_two_copies_the_named_one_stays_else_the_oldest():
    old = {"metadata": {"creationTimestamp": "2024-01-01T00:00:00Z"}}
    new = {"metadata": {"creationTimestamp": "2024-02-01T00:00:00Z"}}
    keep, deletes = DC.keep_one(REF, "west", [("east", old), ("west", new)])
    assert keep[0] == "west" and deletes == (Delete("east", REF, "duplicate of the copy on west"),)
    keep, deletes = DC.keep_one(REF, None, [("east", new), ("west", old)])
    assert keep[0] == "west" and deletes == (Delete("east", REF, "duplicate of the copy on west"),)


def test_an_invalid_staging_object_is_annotated_and_told():
    event, annotate = DC.invalid(REF, "invalid: spec.replicatedJobs is required")
    assert event == Record(REF, "Warning", "Failed", "invalid: spec.replicatedJobs is required")
    assert annotate == Annotate(REF, {ANN_PHASE: DC.PHASE_INVALID, ANN_MESSAGE: "invalid: spec.replicatedJobs is required"},
                                finalizer=True)


def test_a_placed_workload_mirrors_the_copys_status_then_annotates_where_and_how():
    ann = {PLACED_CLUSTER: "east", ANN_MESSAGE: "placed on east by plan p1: 2 pods on 1 node | old detail"}
    mirror, annotate = DC.placed_status(REF, "east", ann, "Running", "Ready: all up", None, {"ready": 2})
    assert mirror == MirrorStatus(REF, "east", {"ready": 2})
    assert annotate == Annotate(REF, {PLACED_CLUSTER: "east", ANN_PHASE: "Running",
                                      ANN_MESSAGE: "placed on east by plan p1: 2 pods on 1 node | Ready: all up"},
                                finalizer=True)
    # the plan's wording is for the cluster it named; a held-back edit says so instead
    _, moved = DC.placed_status(REF, "west", ann, "Pending", "", None, None)
    assert moved.values[ANN_MESSAGE] == "placed on west"
    _, blocked = DC.placed_status(REF, "east", ann, "Running", "", "spec edit not forwarded: no room", None)
    assert blocked.values[ANN_MESSAGE] == "spec edit not forwarded: no room"


def test_a_copy_edited_on_its_cluster_is_put_back_and_an_edit_forwarded():
    desired = {"spec": {"replicas": 2, "template": {"x": 1}}}
    assert DC.correct_drift(REF, "east", desired, {"spec": {"replicas": 2, "template": {"x": 1}, "extra": 0}}) is None
    fix = DC.correct_drift(REF, "east", desired, {"spec": {"replicas": 3, "template": {"x": 1}}})
    assert fix == ForwardSpec(REF, "east", desired, "spec.replicas changed on east by someone else; put back",
                              ("Normal", DC.DRIFT_CORRECTED))
    assert DC.forward_spec(REF, "east", desired, "4") == ForwardSpec(
        REF, "east", desired, "spec change (generation 4) applied to the copy")


def test_an_edit_that_does_not_fit_is_told_not_forwarded():
    text, (event, annotate, condition) = DC.edit_blocked(REF, "east: 8 GPUs short")
    assert text == "spec edit not forwarded: east: 8 GPUs short"
    assert event == Record(REF, "Warning", DC.EDIT_DOES_NOT_FIT, text)
    assert annotate == Annotate(REF, {ANN_MESSAGE: text})
    assert condition == Condition(REF, True, "Placed", text)


def test_a_copy_deleted_by_someone_else_goes_back_to_pending_unless_it_finished():
    gone, (event, annotate) = DC.copy_gone(REF, "east", {PLACED_CLUSTER: "east", ANN_PHASE: "Running"}, known=True)
    assert gone.replace and event == Record(REF, "Warning", DC.COPY_DELETED, gone.reason)
    assert annotate == Annotate(REF, {PLACED_CLUSTER: None, ANN_PHASE: "Pending", ANN_MESSAGE: gone.reason},
                                finalizer=True)
    # not ours to report: pending again, silently
    assert DC.copy_gone(REF, "east", {}, known=False)[1] == ()
    # finished: said once, on the message, and never run again
    gone, (note,) = DC.copy_gone(REF, "east", {ANN_PHASE: "Completed", ANN_MESSAGE: "placed on east"}, known=True)
    assert not gone.replace and note == Annotate(REF, {ANN_MESSAGE: f"placed on east | {gone.reason}"})
    assert DC.copy_gone(REF, "east", {ANN_PHASE: "Completed", ANN_MESSAGE: note.values[ANN_MESSAGE]}, True)[1] == ()


def test_a_withdrawal_deletes_only_the_copy_on_the_cluster_it_leaves():
    delete, event, annotate = DC.withdrawal(REF, "east", "2 of 2 pods not running after 600s", ["east"])
    assert delete == Delete("east", REF, "rescheduling: 2 of 2 pods not running after 600s")
    message = "withdrawn from east: 2 of 2 pods not running after 600s; placing elsewhere"
    assert event == Record(REF, "Warning", "Rescheduled", message)
    assert annotate == Annotate(REF, {PLACED_CLUSTER: None, ANN_PHASE: "Pending", ANN_MESSAGE: message})
    assert not any(isinstance(a, Delete) for a in DC.withdrawal(REF, "east", "why", ["west"]))


def test_an_unplace_writes_an_event_the_condition_and_the_pending_annotations():
    event, condition, annotate = DC.unplaced(REF, "unplaced: east: 8 GPUs short")
    assert event == Record(REF, "Warning", "Unplaced", "unplaced: east: 8 GPUs short")
    assert condition == Condition(REF, False, "Unplaced", "unplaced: east: 8 GPUs short")
    assert annotate == Annotate(REF, {ANN_PHASE: "Pending", ANN_MESSAGE: "unplaced: east: 8 GPUs short",
                                      PLACED_CLUSTER: None}, finalizer=True)


def test_delete_names_the_group_whose_companions_go_with_it():
    assert Delete("east", REF, "its staging object is being deleted", "ml/pair").companions_of == "ml/pair"


# --- the executor performs them (fakes, still no API server) ----------------------------------

class _Informer:
    def __init__(self, *objs):
        self.objs = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in objs}

    def get(self, namespace, name):
        return self.objs.get((namespace, name))


class _Writer:
    def __init__(self):
        self.calls = []

    def annotate(self, ref, staging, values, *, finalizer=False):
        self.calls.append(("annotate", staging["metadata"]["name"], dict(values), finalizer))

    def event(self, ref, staging, type_, reason, message):
        self.calls.append(("event", reason, message))

    def condition(self, ref, staging, *, placed, reason, message):
        self.calls.append(("condition", placed, reason))

    def mirror_status(self, ref, staging, status, cluster):
        self.calls.append(("status", cluster, status))


class _Workers:
    def __init__(self):
        self.jobs = []

    def submit(self, cluster, key, fn, done):
        self.jobs.append((cluster, key))
        return True


def _executor(*staged):
    gvk = ("jobset.x-k8s.io/v1alpha2", "JobSet")
    view = StagingView()
    view.gvks[("jobset.x-k8s.io", "JobSet")] = gvk
    view.informers[gvk] = _Informer(*staged)
    book = Book()
    book.pending[REF] = Pending(0.0)
    targets = Targets(view, book, interpret=None)
    targets.caches["east"] = SimpleNamespace(kinds={gvk: "jobsets"})
    targets.clients["east"] = object()
    writer, workers = _Writer(), _Workers()
    return Executor(writer, view, targets, book, workers, queue.SimpleQueue(), WorkQueue(), FakeClock(),
                    lambda cluster, e: None), writer, workers, book


def test_the_executor_writes_to_the_staging_object_as_cached_and_queues_target_work():
    staged = {"metadata": {"namespace": "ml", "name": "train"}}
    ex, writer, workers, book = _executor(staged)
    ex.perform([MirrorStatus(REF, "east", {"ready": 1}), Annotate(REF, {ANN_PHASE: "Running"}, finalizer=True),
                Unplace(REF, "unplaced: no room"), Delete("east", REF, "gone"),
                ForwardSpec(REF, "east", {"spec": {}}, "drift")])
    assert writer.calls == [("status", "east", {"ready": 1}), ("annotate", "train", {ANN_PHASE: "Running"}, True),
                            ("event", "Unplaced", "unplaced: no room"), ("condition", False, "Unplaced"),
                            ("annotate", "train", {ANN_PHASE: "Pending", ANN_MESSAGE: "unplaced: no room",
                                                   PLACED_CLUSTER: None}, True)]
    assert book.pending[REF].message == "unplaced: no room"
    assert workers.jobs == [("east", ("delete", REF)), ("east", ("apply", REF))]
    assert ("east", REF) in book.deleting


def test_the_executor_skips_hub_writes_for_a_staging_object_gone_meanwhile():
    ex, writer, _, _ = _executor()
    ex.perform([Annotate(REF, {ANN_PHASE: "Running"}), Record(REF, "Normal", "Placed", "placed")])
    assert writer.calls == []
