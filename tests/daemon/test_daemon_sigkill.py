"""`placer daemon` killed with SIGKILL at random moments during a 300-object burst and
restarted each time (issue 13, "Faults, each a test"): the daemon runs as the real CLI in a
subprocess against test API servers this test starts; zero duplicates (every copy ever
created counts), zero lost."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import yaml

from placer import daemon as D
from tests.daemon.daemon_helpers import (
    STAGING,
    WRITE_VERBS,
    Env,
    created_copies,
    gpu_nodes,
    jobset,
    token_kubeconfig,
    wait_for,
)

JOBSET = ("jobset.x-k8s.io/v1alpha2", "JobSet")
TARGETS = ("alpha", "beta")
KILLS = 4


def _clusters_file(path) -> str:
    path.write_text(yaml.safe_dump({"hub": {"context": "hub", "stagingNamespace": STAGING},
                                    "clusters": [{"name": c, "context": c} for c in TARGETS]}))
    return str(path)


def _expire_leases(fleet) -> None:
    """The killed holder is dead (waited for): let its Lease lapse now instead of after its
    15 s, as time would. Only what a dead process held is touched."""
    store = fleet["hub"].store
    rt = store.type_for("coordination.k8s.io/v1", "Lease")
    for lease in fleet["hub"].objects("coordination.k8s.io/v1", "Lease"):     # the daemon's, wherever it is
        store.delete(rt, lease["metadata"]["namespace"], lease["metadata"]["name"])


def _first_write(fleet, token: str) -> bool:
    return any(r.verb in WRITE_VERBS and r.resource != "leases"
               for c in ("hub", *TARGETS) for r in fleet[c].requests.select(token=token))


def test_sigkill_at_random_moments_during_a_burst_of_300(make_fleet, tmp_path):
    fleet = make_fleet(names=("hub", *TARGETS), bookmark_interval=0.5)
    fleet["alpha"].seed(gpu_nodes("a", 20))
    fleet["beta"].seed(gpu_nodes("b", 20))                   # 320 GPUs: all 300 one-GPU workloads fit
    env = Env(fleet)
    clusters = _clusters_file(tmp_path / "clusters.yaml")
    rng = random.Random(13)
    names = [f"w{i:03d}" for i in range(300)]
    procs: list[subprocess.Popen] = []

    def start(run: int) -> subprocess.Popen:
        kubeconfig = token_kubeconfig(fleet, tmp_path / f"run{run}.kubeconfig", f"run-{run}")
        log = open(tmp_path / f"run{run}.log", "wb")
        proc = subprocess.Popen([sys.executable, "-m", "placer", "daemon", "--clusters", clusters,
                                 "--kubeconfig", str(kubeconfig), "--batch-window", "0.2", "--time-limit", "1"],
                                stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        procs.append(proc)
        return proc

    def done() -> bool:
        staged = fleet["hub"].objects(*JOBSET, STAGING)
        placed = [o for o in staged if (o["metadata"].get("annotations") or {}).get(D.PLACED_CLUSTER)]
        return len(placed) == len(names) and \
            sum(len(fleet[c].objects(*JOBSET, STAGING)) for c in TARGETS) == len(names)

    try:
        proc = start(0)
        burst = threading.Thread(target=lambda: list(ThreadPoolExecutor(8).map(
            env.create, [jobset(n, pods=1, gpus=1) for n in names])), daemon=True)
        burst.start()
        killed_after = []
        for run in range(KILLS):
            # once this daemon is acting, kill it at a random moment of its work (if a restarted
            # daemon finds everything done, it has nothing to write: kill it anyway)
            wait_for(lambda: _first_write(fleet, f"run-{run}") or done() or proc.poll() is not None, timeout=240,
                     what=f"daemon run {run} acting", interval=0.05)
            assert proc.poll() is None, (tmp_path / f"run{run}.log").read_text()[-2000:]
            pause = rng.uniform(0.0, 2.0)
            time.sleep(pause)
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            killed_after.append(round(pause, 2))
            _expire_leases(fleet)
            proc = start(run + 1)
        burst.join(240)
        assert not burst.is_alive()
        wait_for(done, timeout=240, what="all 300 placed after the last restart", interval=0.2)
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)

        made = created_copies(fleet, TARGETS)
        dup = {n: cs for n, cs in made.items() if len(cs) > 1}
        assert not dup, f"{len(dup)} duplicates (kills {killed_after} s into each run's work): " \
                        f"{sorted(dup.items())[:5]}"
        assert sorted(made) == names, f"lost: {sorted(set(names) - set(made))[:10]}"
        now = {o["metadata"]["name"]: c for c in TARGETS for o in fleet[c].objects(*JOBSET, STAGING)}
        staged = {o["metadata"]["name"]: (o["metadata"].get("annotations") or {}).get(D.PLACED_CLUSTER)
                  for o in fleet["hub"].objects(*JOBSET, STAGING)}
        assert now == staged == {n: cs[0] for n, cs in made.items()}
        # the first run really acted: the first kill landed in the middle of the work
        assert _first_write(fleet, "run-0")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(10)
        env.stop()
