"""A copy just created is interpreted on its cluster's worker, not on the daemon thread (issue
24, the daemon's burst): the placed report (`Creator.report`, on the daemon thread, which every
step waits for) then finds the copy's interpretation remembered, and writes the same values."""

from __future__ import annotations

import sys
import threading
import time

import placer.definitions.interpret as I
from placer.model.names import ANN_MESSAGE, ANN_PHASE, MANAGED, PLACED_CLUSTER
from tests.daemon.daemon_helpers import STAGING, jobset


def test_the_placed_report_finds_the_copy_interpreted_on_the_clusters_worker(env, monkeypatch):
    computed: list[tuple[str, bool, bool]] = []         # (thread, a copy?, asked by the report?)
    inner = I._interpret

    def spy(obj, *args):
        frame, by_report = sys._getframe(1), False
        while frame is not None:
            by_report = by_report or frame.f_code.co_name == "report"
            frame = frame.f_back
        labels = (obj.get("metadata") or {}).get("labels") or {}
        computed.append((threading.current_thread().name, MANAGED in labels, by_report))
        return inner(obj, *args)
    monkeypatch.setattr(I, "_interpret", spy)
    d = env.daemon()
    assert d.wait_idle(10)
    names = [f"m{i}" for i in range(4)]
    for n in names:
        env.create(jobset(n, pods=1, gpus=1))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not all(
            (env.hub.get(env.hub.resource_for("jobset.x-k8s.io/v1alpha2", "JobSet"), n, STAGING)["metadata"]
             .get("annotations") or {}).get(PLACED_CLUSTER) for n in names):
        time.sleep(0.05)
    assert d.wait_idle(20)
    copies = [(thread, by_report) for thread, copy, by_report in computed if copy]
    assert copies and not any(by_report for _, by_report in copies), computed
    assert all(thread.startswith("placer-exec") for thread, _ in copies[:len(names)]), computed
    for n in names:                                   # the report's values, as the copy says
        ann = env.hub.get(env.hub.resource_for("jobset.x-k8s.io/v1alpha2", "JobSet"), n, STAGING)["metadata"][
            "annotations"]
        assert ann[PLACED_CLUSTER] in ("alpha", "beta") and ann[ANN_PHASE] == "Pending", ann
        assert ann[ANN_MESSAGE].startswith("placed on"), ann
