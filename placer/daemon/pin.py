"""Pinning (`steer: pinned`, issue 22): each gated pod of a copy gets ONE planned node.

A pinned copy's pod templates carry the required node affinity to their planned nodes and
the scheduling gate `placer.dev/pin`, and the copy records the plan's pods per template and
node (placer.actuate.steer). Its operator copies the template, so its pods arrive gated
(Pending, SchedulingGated). For each, the leader picks a planned node of its template whose
count the template's pods bound or pinned there have not used up (`steer.assign`) and, in
one fenced request on the cluster's queue, narrows the pod's node affinity to that node and
lifts the gate (`steer.pin_patch`). A pod created later (a Job's retry) is gated again and
pinned to a node whose count is free then (a finished pod no longer counts).

Lifted without a node: gated pods on a cluster whose entry is no longer `pinned`, pods of a
copy that records no counts, and pods beyond the plan's counts (they wait as `required`
would hold them). While no daemon leads, gated pods wait: the gate is what holds them.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Hashable, Mapping

from placer import actuate as A
from placer.actuate.steer import ANN_PINNED, STEER_PINNED, Seat, assign, counts_of, is_gated, pin_patch
from placer.daemon.caches import POD, TERMINAL, ClusterCache
from placer.daemon.targets import Interpret, Targets
from placer.model.errors import PlacerError
from placer.model.workload import WorkloadRef

log = logging.getLogger("placer.daemon")

Submit = Callable[[str, Hashable, Callable[[], Any], Callable[[Any], None]], bool]
RETRY_AFTER = 1.0


def _node_of(pod: Mapping[str, Any]) -> str | None:
    meta = pod.get("metadata") or {}
    return (pod.get("spec") or {}).get("nodeName") or (meta.get("annotations") or {}).get(ANN_PINNED)


class Pinner:
    """Lifts the pin gates of the pods on the targets (the leader's loop calls `tick`)."""

    def __init__(self, targets: Targets, entries: Mapping[str, Any], interpret: Interpret, submit: Submit,
                 on_error: Callable[[str, PlacerError], None]):
        self.targets, self.entries, self.interpret = targets, entries, interpret
        self.submit, self.on_error = submit, on_error
        self._lock = threading.Lock()
        # (cluster, ns, pod) -> the node it is being pinned to, until its cache shows it ungated
        self._inflight: dict[tuple[str, str, str], str | None] = {}
        self._backoff: dict[tuple[str, str, str], float] = {}    # a refused patch: not before then
        self.patched = 0

    def tick(self) -> bool:
        """Pin what is gated now; True when a patch was queued."""
        did = False
        for cluster, cache in list(self.targets.caches.items()):
            gated = cache.gated.pods()
            self._forget(cluster, gated)
            if gated:
                did = self._cluster(cluster, cache, gated) or did
        return did

    def _forget(self, cluster: str, gated: list[dict]) -> None:
        if not self._inflight and not self._backoff:
            return                                    # asked every step: nothing to forget, nothing to read
        still = {(cluster, p["metadata"]["namespace"], p["metadata"]["name"]) for p in gated}
        with self._lock:
            for k in [k for k in self._inflight if k[0] == cluster and k not in still]:
                del self._inflight[k]
            for k in [k for k in self._backoff if k[0] == cluster and k not in still]:
                del self._backoff[k]

    def _cluster(self, cluster: str, cache: ClusterCache, gated: list[dict]) -> bool:
        pinned = A.handoff_of(self.entries.get(cluster)).steer == STEER_PINNED
        plan: dict[str, str | None] = {}              # pod "ns/name" -> node (None: just ungate)
        by_copy: dict[tuple[str, str], list[dict]] = {}
        for p in gated:
            meta = p["metadata"]
            by_copy.setdefault((meta["namespace"], (meta.get("labels") or {}).get(A.WORKLOAD, "")), []).append(p)
        copies = self._copies(cache, {k for k in by_copy}) if pinned else {}
        for (ns, tag), pods in by_copy.items():
            obj = copies.get((ns, tag))
            if not pinned or (obj is None and not tag):
                plan.update({f"{ns}/{p['metadata']['name']}": None for p in pods})   # not ours to hold
            elif obj is not None:
                plan.update(self._assign(cluster, cache, obj, pods))
            # else: its copy not in the cache yet (watches race): the next tick
        did = False
        for p in gated:
            key = f"{p['metadata']['namespace']}/{p['metadata']['name']}"
            if key in plan:
                did = self._patch(cluster, p, plan[key]) or did
        return did

    def _copies(self, cache: ClusterCache, wanted: set[tuple[str, str]]) -> dict[tuple[str, str], dict]:
        out = {}
        for gvk, inf in cache.copies.items():
            for obj in inf.items():
                meta = obj.get("metadata") or {}
                k = (meta.get("namespace") or "", (meta.get("labels") or {}).get(A.WORKLOAD, ""))
                if k in wanted:
                    out[k] = {**obj, "apiVersion": gvk[0], "kind": gvk[1]}
        return out

    def _assign(self, cluster: str, cache: ClusterCache, obj: dict, gated: list[dict]) -> dict[str, str | None]:
        """Pod "ns/name" -> its node, for the gated pods of one copy."""
        ns = obj["metadata"]["namespace"]
        counts = counts_of(obj)
        out: dict[str, str | None] = {f"{ns}/{p['metadata']['name']}": None for p in gated}
        if not counts:
            return out                                    # nothing to pin to: lifted as `required`
        try:
            w = self.interpret(obj, f"{cluster}/{WorkloadRef.of(obj)}")
        except PlacerError as e:
            self.on_error(cluster, e)
            return {}                                     # not lifted: the definition may come back
        pods = [p for p in cache.pods_in(ns) if (p.get("status") or {}).get("phase") not in TERMINAL]
        with self._lock:
            inflight = dict(self._inflight)
        many, memo = len(w.instances) > 1, {}             # type: ignore[var-annotated]
        for inst in w.instances:
            planned = counts.get(inst.key)
            if not planned:
                continue
            seats = []
            for p in A.instance_pods(inst, w, pods, many, memo):
                name = p["metadata"]["name"]
                k = (cluster, ns, name)
                node = inflight[k] if k in inflight else _node_of(p)
                seats.append(Seat(name, node, is_gated(p) and k not in inflight))
            out.update({f"{ns}/{n}": node for n, node in assign(planned, seats).items()})
        return out

    def _patch(self, cluster: str, pod: dict, node: str | None) -> bool:
        ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        k = (cluster, ns, name)
        with self._lock:
            if k in self._inflight or self._backoff.get(k, 0.0) > time.monotonic():
                return False
            self._inflight[k] = node
        client = self.targets.client(cluster)
        body = pin_patch(pod, node)

        def patch() -> Any:
            return client.patch(POD, name, body, ns)

        def done(result: Any) -> None:
            if isinstance(result, PlacerError):
                with self._lock:
                    self._inflight.pop(k, None)           # tried again shortly (a 409: with a fresher pod)
                    self._backoff[k] = time.monotonic() + RETRY_AFTER
                self.on_error(cluster, result)
            else:
                self.patched += 1
                log.info("pod %s/%s on %s: %s", ns, name, cluster, f"pinned to {node}" if node else "ungated")
        if not self.submit(cluster, ("pin", cluster, ns, name), patch, done):
            with self._lock:
                self._inflight.pop(k, None)
            return False
        return True

