"""A target that hangs (issue 24, item 5): seconds from eight arrivals until all eight are
created on the healthy cluster, with production timings (default lease, retry policy and
request deadline; 30 s client timeout), while the other accepts connections and answers
nothing until they are there or 60 s pass. Judged from the healthy cluster's request log.

    python benchmarks/hang.py [from-start] [mid-create]

from-start: alpha hangs before the daemon starts; mid-create: alpha (where equal work goes
first) goes dark at the first apply of a copy on it."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from placer import daemon as D  # noqa: E402
from placer.daemon import LeaseTiming  # noqa: E402
from placer.kube import RetryPolicy  # noqa: E402
from tests.daemon.daemon_helpers import Env, gpu_nodes, jobset  # noqa: E402
from tests.kubeapi.server import start_fleet  # noqa: E402


def run(mode: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        fleet = start_fleet(["hub", "alpha", "beta"], tmp, bookmark_interval=0.5)
        fleet["alpha"].seed(gpu_nodes("a", 2))
        fleet["beta"].seed(gpu_nodes("b", 2))
        env = Env(fleet)
        try:
            if mode == "from-start":
                fleet["alpha"].faults.hang()
            t_start = time.monotonic()
            d = env.daemon(lease=LeaseTiming(), retry=RetryPolicy(), client_timeout=30)
            started = time.monotonic() - t_start
            if mode == "mid-create":
                env.create(jobset("probe", pods=1, gpus=1))
                while env.annotations(jobset("probe")).get(D.PLACED_CLUSTER) != "alpha":
                    time.sleep(0.05)
                fleet["alpha"].faults.hang(match="/jobsets/", methods=("PATCH",), spread=True)
            names = [f"w{i}" for i in range(8)]
            t0 = time.monotonic()
            for n in names:
                env.create(jobset(n, pods=1, gpus=1))
            took = None
            while time.monotonic() - t0 < 60:
                if set(names) <= {r.name for r in fleet["beta"].requests.created("jobsets")}:
                    took = time.monotonic() - t0
                    break
                time.sleep(0.05)
            on_beta = len({r.name for r in fleet["beta"].requests.created("jobsets")} & set(names))
            print(f"{mode}: daemon start {started:.2f}s; {on_beta} of 8 on beta "
                  + (f"after {took:.2f}s" if took is not None else "within 60s of the hang")
                  + f"; /healthz {d.healthy()[1]!r}", flush=True)
        finally:
            fleet["alpha"].faults.release()
            env.stop()
            fleet.stop()


if __name__ == "__main__":
    for mode in sys.argv[1:] or ["from-start", "mid-create"]:
        run(mode)
