"""One fidelity scenario: nodes (some with pods already bound), one workload; placer's plan
for it on that cluster against what the real kube-scheduler does with its pods.

placer's verdict is what `placer submit --dry-run` decides: live inventory of the cluster
through placer's own client, interpretation, solver. The scheduler's verdict: every pod
bound (fits), or every pod settled with at least one PodScheduled=False (does not fit).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from placer.definitions.catalog import Catalog
from placer.inputs.manifests import load_groups
from placer.kube import Kube
from placer.model.plan import Plan
from placer.ops.context import context_of
from placer.ops.submit import SubmitRequest, submit

from .cluster import BoundPod, Cluster, NodeSpec
from .pods import materialise


@dataclass(frozen=True)
class Scenario:
    name: str
    nodes: tuple[NodeSpec, ...]
    workload: Mapping[str, Any]                        # one workload object
    bound: tuple[BoundPod, ...] = ()
    companions: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class PodState:
    name: str
    node: str | None                                   # spec.nodeName once bound
    unschedulable: str | None                          # the PodScheduled=False message


@dataclass(frozen=True)
class Outcome:
    pods: tuple[PodState, ...]
    expected: int
    seconds: float
    timed_out: bool
    events: tuple[str, ...] = ()                       # controller warnings when pods are missing
    refused: tuple[str, ...] = ()                      # pods the API server refused to create

    @property
    def all_bound(self) -> bool:
        return len(self.pods) == self.expected and all(p.node for p in self.pods)

    @property
    def unschedulable(self) -> tuple[PodState, ...]:
        return tuple(p for p in self.pods if not p.node and p.unschedulable)


@dataclass(frozen=True)
class Verdict:
    scenario: str
    cluster: str
    placer_fits: bool
    placer_reason: str                                 # why not, in placer's words ("" when placed)
    placer_nodes: Mapping[str, Mapping[str, int]]
    outcome: Outcome
    problems: tuple[str, ...] = field(default_factory=tuple)

    @property
    def scheduler_fits(self) -> bool:
        return self.outcome.all_bound

    @property
    def agree(self) -> bool:
        return not self.problems

    @property
    def pods(self) -> int:
        return self.outcome.expected


def pod_state(pod: Mapping[str, Any]) -> PodState:
    conds = (pod.get("status") or {}).get("conditions") or ()
    sched = next((c for c in conds if c.get("type") == "PodScheduled"), None)
    why = None
    if sched and sched.get("status") == "False":
        why = f"{sched.get('reason')}: {sched.get('message')}"
    return PodState(pod["metadata"]["name"], (pod.get("spec") or {}).get("nodeName"), why)


def _refusals(cluster: Cluster, namespace: str) -> tuple[str, ...]:
    """Controllers' FailedCreate warnings where the API server refused the pods."""
    return tuple(f"{(e.get('involvedObject') or {}).get('kind')}/{(e.get('involvedObject') or {}).get('name')}: "
                 f"{e.get('message')}" for e in cluster.events(namespace)
                 if e.get("reason") == "FailedCreate" and "forbidden" in (e.get("message") or "").lower())


def observe(cluster: Cluster, namespace: str, expected: int, *, timeout: float = 30.0,
            settle: float = 1.0, poll: float = 0.1, refused: Sequence[str] = ()) -> Outcome:
    """Wait until every expected pod is bound, or every pod has been decided (bound or
    PodScheduled=False, or refused by the API server) and nothing changed for `settle`
    seconds, or `timeout`."""
    start = time.monotonic()
    last, since = None, start
    refused = tuple(refused)
    while True:
        pods = tuple(pod_state(p) for p in cluster.pods(namespace)
                     if "fidelity/bound" not in ((p.get("metadata") or {}).get("labels") or {}))
        now = time.monotonic()
        if len(pods) < expected and not refused and now - since >= settle:
            refused = _refusals(cluster, namespace)
        created = len(pods) + (expected - len(pods) if refused else 0)
        done = len(pods) >= expected and all(p.node for p in pods)
        decided = created >= expected and all(p.node or p.unschedulable for p in pods)
        if pods != last:
            last, since = pods, now
        if done or (decided and now - since >= settle):
            return Outcome(tuple(sorted(pods, key=lambda p: p.name)), expected, now - start, False, (), refused)
        if now - start > timeout:
            events = () if len(pods) >= expected else tuple(
                f"{(e.get('involvedObject') or {}).get('kind')}/{(e.get('involvedObject') or {}).get('name')}: "
                f"{e.get('reason')}: {e.get('message')}"
                for e in cluster.events(namespace) if e.get("type") == "Warning")
            return Outcome(tuple(sorted(pods, key=lambda p: p.name)), expected, now - start, True, events)
        time.sleep(poll)


def placer_plan(kube: Kube, context: str, paths: Sequence[str], catalog: Catalog) -> Plan:
    """What `placer submit --dry-run --clusters <one entry for context> -f paths` plans."""
    result = submit(context_of([{"name": context, "context": context}], catalog, kube),
                    SubmitRequest(tuple(paths), dry_run=True))
    assert result.plan is not None, "placer found the workload already placed"
    return result.plan


def _with_namespace(obj: Mapping[str, Any], namespace: str) -> dict[str, Any]:
    return {**obj, "metadata": {**(obj.get("metadata") or {}), "namespace": namespace}}


def compare(name: str, context: str, plan: Plan, outcome: Outcome) -> Verdict:
    placed = bool(plan.placements) and not plan.unplaced
    reason = "; ".join(r.render() for u in plan.unplaced for r in u.reasons.values())
    nodes = {n: dict(per) for p in plan.placements for n, per in p.nodes.items()}
    problems: list[str] = []
    if outcome.refused:
        if placed:
            problems.append(f"placer places it ({_nodes_text(nodes)}) but the API server refuses its pods: "
                            + " | ".join(outcome.refused[:2]))
    elif outcome.timed_out and len(outcome.pods) < outcome.expected:
        problems.append(f"only {len(outcome.pods)} of {outcome.expected} pods were created: "
                        + " | ".join(outcome.events[:3]))
    elif placed and not outcome.all_bound:
        for p in outcome.pods:
            if not p.node:
                problems.append(f"placer places it ({_nodes_text(nodes)}) but pod {p.name} is not bound: "
                                f"{p.unschedulable or 'undecided after timeout'}")
    elif not placed and outcome.all_bound:
        problems.append(f"placer leaves it unplaced ({reason}) but the scheduler bound every pod: "
                        + ", ".join(f"{p.name}->{p.node}" for p in outcome.pods))
    elif not placed and not outcome.unschedulable:
        problems.append("placer leaves it unplaced, the scheduler gave no reason for the pods it left")
    return Verdict(name, context, placed, reason, nodes, outcome, tuple(problems))


def _nodes_text(nodes: Mapping[str, Mapping[str, int]]) -> str:
    return ", ".join(f"{n}: {sum(per.values())}" for n, per in sorted(nodes.items()))


def run(scenario: Scenario, *, cluster: Cluster, kube: Kube, catalog: Catalog, namespace: str,
        workdir: Path, timeout: float = 30.0, keep: bool = False) -> Verdict:
    """Set the scenario up on an empty cluster, ask placer, force the workload there, judge,
    clean up (unless `keep`)."""
    try:
        cluster.add_nodes(scenario.nodes)
        cluster.ensure_namespace(namespace)
        cluster.bind_pods(namespace, scenario.bound)
        docs = [_with_namespace(scenario.workload, namespace)]
        docs += [_with_namespace(c, namespace) for c in scenario.companions]
        path = workdir / f"{scenario.name}.yaml"
        path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
        plan = placer_plan(kube, cluster.context, [str(path)], catalog)
        workload = next(w for g in load_groups([str(path)], catalog) for w in g.workloads)
        expected, refused = materialise(cluster, namespace, workload, catalog)
        placed = bool(plan.placements) and not plan.unplaced
        outcome = observe(cluster, namespace, expected, timeout=timeout if placed else min(timeout, 15.0),
                          refused=refused)
        return compare(scenario.name, cluster.context, plan, outcome)
    finally:
        if not keep:
            reset(cluster, namespace, [n.name for n in scenario.nodes])


def reset(cluster: Cluster, namespace: str, nodes: Sequence[str]) -> None:
    cluster.clear_namespace(namespace)
    cluster.delete_nodes(nodes)


class Pool:
    """Scenarios run one at a time per cluster, the clusters in parallel (a thread each)."""

    def __init__(self, kubeconfig: str | Path, contexts: Sequence[str], catalog: Catalog, workdir: Path,
                 namespace: str = "fidelity"):
        self.kubeconfig, self.contexts, self.catalog = str(kubeconfig), list(contexts), catalog
        self.workdir, self.namespace = Path(workdir), namespace
        self.clusters = [Cluster(self.kubeconfig, c) for c in self.contexts]
        self.kubes = [Kube(self.kubeconfig) for _ in self.contexts]

    def prepare(self, runtime_classes: Mapping[str, Mapping[str, Any] | None] = {}) -> None:
        """Every cluster empty of leftovers (nodes, pods), with the given RuntimeClasses
        (name -> fields such as overhead and scheduling), and serving the catalog's custom
        kinds (minimal CRDs: no operator runs; placer plans a kind only where it is served)."""
        from tests.kubeapi.builders import catalog_crds

        for c in self.clusters:
            c.ensure_crds(catalog_crds())
            c.ensure_namespace(self.namespace)
            c.clear_namespace(self.namespace)
            c.delete_nodes(c.node_names())
            for name, fields in runtime_classes.items():
                c.ensure_runtime_class(name, fields)

    def run(self, scenarios: Sequence[Scenario], *, timeout: float = 30.0, done: Any = None,
            keep_errors: bool = False) -> list[Verdict | BaseException]:
        """Verdicts in scenario order; a scenario that could not be run raises (or, with
        `keep_errors`, stands as its exception)."""
        import queue
        import threading

        todo: "queue.Queue[tuple[int, Scenario]]" = queue.Queue()
        for item in enumerate(scenarios):
            todo.put(item)
        results: dict[int, Verdict | BaseException] = {}

        def worker(k: int) -> None:
            while True:
                try:
                    i, s = todo.get_nowait()
                except queue.Empty:
                    return
                try:
                    results[i] = run(s, cluster=self.clusters[k], kube=self.kubes[k], catalog=self.catalog,
                                     namespace=self.namespace, workdir=self.workdir, timeout=timeout)
                except BaseException as e:          # reported with the scenario, the others go on
                    results[i] = e
                if done is not None:
                    done(s, results[i])

        threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(len(self.clusters))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        out = []
        for i, s in enumerate(scenarios):
            r = results[i]
            if isinstance(r, BaseException) and not keep_errors:
                raise RuntimeError(f"scenario {s.name} failed: {type(r).__name__}: {r}") from r
            out.append(r)
        return out
