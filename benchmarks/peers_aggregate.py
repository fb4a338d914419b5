"""The aggregate greedy of benchmarks/peers.py and peers_replay.py: the cluster-totals policy of tools
such as Nova. In arrival order each workload goes to the worker with the most free GPUs on the nodes
it may use (its product, its tolerations: a little kinder than cluster totals alone), if that total
covers it, created there directly; the worker's kube-scheduler binds what it can, node by node.

Static (peers.py): free GPUs are the pools' minus the fillers', and a workload no total covers is
never created. Over time (peers_replay.py): before each decision the free GPUs are computed again
from the workers' pods (free_now), so capacity freed by finished tasks is seen; a task no total
covers waits in the queue and is tried again, in arrival order, every 0.5 s while any waits."""
from __future__ import annotations

from typing import Callable, TypeVar

from benchmarks.peers import GPU, Load, Pool, Scenario, owner

T = TypeVar("T")

Key = tuple[str, str, "str | None"]     # a pool of free GPUs: (worker, product, taint)


def pool_key(pool: Pool) -> Key:
    return (pool.worker, pool.product, pool.taint)


def usable(load: Load, key: Key) -> bool:
    """The nodes of pool `key` may run `load`'s pods: its product, its tolerations."""
    _, product, taint = key
    return load.product in (None, product) and (taint is None or load.tolerate)


def take(free: dict[Key, int], worker: str, need: int, ok=lambda key: True) -> None:
    """Take `need` GPUs from `worker`'s pools that `ok` allows, largest first."""
    for k in sorted(free, key=lambda k: -free[k]):
        if k[0] == worker and ok(k) and need > 0:
            got = min(need, max(0, free[k]))
            free[k] -= got
            need -= got


def place(free: dict[Key, int], workers: list[str], load: Load) -> str | None:
    """One step of the cluster-totals policy: the worker with the most free GPUs on the nodes `load`
    may use (ties: the first worker) if that total covers it; its GPUs are taken from `free`. None
    when no worker's total covers it."""
    totals = {w: sum(v for k, v in free.items() if k[0] == w and usable(load, k)) for w in workers}
    w = max(workers, key=lambda w: (totals[w], -workers.index(w)))
    if totals[w] < load.total_gpus:
        return None
    take(free, w, load.total_gpus, lambda k: usable(load, k))
    return w


def choice(scenario: Scenario, workers: list[str]) -> dict[str, str]:
    """Cluster totals: each workload, in arrival order, onto the worker with the most free GPUs on
    the nodes it may use (its product, its tolerations), when that total covers it."""
    free = {pool_key(p): p.count * p.gpus - sum(p.used) for p in scenario.pools}
    out = {}
    for load in scenario.loads:
        w = place(free, workers, load)
        if w is not None:
            out[load.name] = w
    return out


def pod_gpus(pod: dict) -> int:
    return sum(int(((c.get("resources") or {}).get("requests") or {}).get(GPU, 0))
               for c in pod["spec"].get("containers") or ())


def free_now(pools: list[Pool], pods: dict[str, list[dict]], created: dict[str, tuple[str, int]]) -> dict[Key, int]:
    """Free GPUs per pool now, from the workers' pods: each pool's GPUs minus those of the pods not
    finished, a bound pod's from its node's pool, an unbound one's (waiting for its worker's
    scheduler) from its worker's pools, largest first, as the policy took them; a workload created
    (`created`: name -> (worker, GPUs)) whose pod no list shows yet counts as such an unbound pod."""
    free = {pool_key(p): p.count * p.gpus - sum(p.used) for p in pools}
    pool_of = {f"{p.prefix}-{i}": pool_key(p) for p in pools for i in range(p.count)}
    pending = dict.fromkeys(pods, 0)
    seen: set[str | None] = set()
    for worker, listed in pods.items():
        for pod in listed:
            seen.add(owner(pod))
            if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
                continue
            node = pod["spec"].get("nodeName")
            if node in pool_of:
                free[pool_of[node]] -= pod_gpus(pod)
            else:
                pending[worker] = pending.get(worker, 0) + pod_gpus(pod)
    for name, (worker, gpus) in created.items():
        if name not in seen:
            pending[worker] = pending.get(worker, 0) + gpus
    for worker, need in pending.items():
        take(free, worker, need)
    return free


def round_of(queue: list[T], free: dict[Key, int], workers: list[str],
             load: Callable[[T], Load]) -> list[tuple[T, str]]:
    """The tasks of `queue` (arrived, not yet created; in arrival order) the cluster-totals policy
    places now (`load` gives each one's Load), each onto the worker with the most free GPUs if that
    total covers it (place); a task no total covers stays queued, the tasks behind it are still tried."""
    placed = []
    for a in queue:
        worker = place(free, workers, load(a))
        if worker is not None:
            placed.append((a, worker))
    return placed
