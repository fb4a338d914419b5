"""The fewest GPUs to take out of a cluster so that one group fits: a small node-level CP-SAT
model (which candidates leave, how many pods of each kind go on each node), used by the
options search (placer.solve.options) to pick the removal set it then proves by re-solving.

Pure. Exact at node level for what it is given (the nodes each pod kind may use, every
resource per node); deterministic (one worker, fixed seed, deterministic time).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence


@dataclass(frozen=True)
class Kind:
    """`pods` identical pods of `demand`, allowed on `nodes`."""

    demand: Mapping[str, int]
    pods: int
    nodes: frozenset[str]


def fewest(kinds: Sequence[Kind], room: Mapping[str, Mapping[str, int]], unlimited: Mapping[str, frozenset[str]],
           frees: Sequence[Mapping[str, Mapping[str, int]]], weights: Sequence[int], *,
           effort: float = 0.5) -> tuple[list[int], bool] | None:
    """The candidates (indices into `frees`) of least total weight whose removal lets every
    pod fit, and whether that is proven optimal; None when no set does (or none was found).
    `room`: node -> resource -> what is left now (below 0 on an overcommitted node, which
    then takes pods only once enough is taken out there);
    `unlimited`: node -> resources it does not limit (a node without `pods` allocatable);
    `frees[c]`: node -> resource -> what removing candidate c gives back."""
    # imported here: importing cp_model starts a native thread, which in the daemon would
    # take SIGINT/SIGTERM before the main thread's mask is set (and costs every plan its import)
    from ortools.sat.python import cp_model

    m = cp_model.CpModel()
    x = [m.new_bool_var(f"x{c}") for c in range(len(frees))]
    load: dict[tuple[str, str], list] = {}
    # an overcommitted node (room below 0) limits only the pods put on it: whether it takes any
    hosts = {n: m.new_bool_var(f"u_{n}") for n in sorted(room) if any(v < 0 for v in room[n].values())}
    for j, k in enumerate(kinds):
        ys = []
        for n in sorted(k.nodes):
            if n not in room:
                continue
            y = m.new_int_var(0, k.pods, f"y{j}_{n}")
            if n in hosts:
                m.add(y <= k.pods * hosts[n])
            ys.append(y)
            for r, v in k.demand.items():
                if v > 0 and r not in unlimited.get(n, frozenset()):
                    load.setdefault((n, r), []).append(v * y)
        if not ys:
            return None
        m.add(sum(ys) == k.pods)
    for (n, r), terms in load.items():
        back = [(f.get(n, {}).get(r, 0), x[c]) for c, f in enumerate(frees) if f.get(n, {}).get(r, 0)]
        left = room[n].get(r, 0)
        slack = -left * (1 - hosts[n]) if left < 0 else 0         # unused: no limit (free is max(0, .))
        m.add(sum(terms) <= left + sum(v * xc for v, xc in back) + slack)
    m.minimize(sum(w * xc for w, xc in zip(weights, x)))
    s = cp_model.CpSolver()
    s.parameters.num_workers = 1
    s.parameters.random_seed = 0
    s.parameters.max_deterministic_time = effort
    s.parameters.catch_sigint_signal = False    # Ctrl-C is the caller's (see stages._search_parameters)
    status = s.solve(m)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    return [c for c, xc in enumerate(x) if s.value(xc)], status == cp_model.OPTIMAL
