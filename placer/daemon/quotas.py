"""Fleet-wide quotas in the daemon (issue 23): the hub's `placer.dev/v1alpha1 FleetQuota`
objects, followed by a watch and merged with the clusters file's `quotas:`; what each
quota's workloads already use, counted from the daemon's book (placer's own copies, their
pods bound or not, and the creates in flight); each object's status, written when it changes.

- **Which quotas.** The clusters file's entries in file order, a FleetQuota of the same name
  taking that entry's place (the object wins: `kubectl apply` edits it live), then the other
  FleetQuota objects by name. A malformed object is left out with a `Valid=False` condition on
  its status, one log warning and one Warning Event `InvalidQuota` regarding it (once per
  generation of its spec: kubectl describe shows it); the others keep working.
- **Use** of a quota: the pods x per-pod requests of its workloads that are placed (not
  finished) or being created. A round plans against it (`Quotas.counted`), so a restarted
  daemon that adopted its copies admits no more than the quotas leave.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from typing import Any, Callable, Iterable, Mapping

from pydantic import ValidationError

from placer.daemon.events import WARNING, Recorder
from placer.daemon.informer import Informer
from placer.daemon.state import Book, ann_of
from placer.daemon.targets import Targets
from placer.daemon.view import StagingView
from placer.definitions.interpret import Interpreter
from placer.inputs.quotas import QuotaSpec
from placer.kube import KubeClient
from placer.model.errors import PlacerError
from placer.model.names import ANN_PHASE
from placer.model.quantity import format_quantity
from placer.model.quota import Quota, Quotas, add_usage, lent
from placer.model.workload import Phase, Workload, WorkloadRef
from placer.solve.quotas import workload_demand

log = logging.getLogger("placer.daemon")

GVK = ("placer.dev/v1alpha1", "FleetQuota")
INVALID_QUOTA = "InvalidQuota"                   # the Warning Event's reason on a malformed FleetQuota
FINISHED = (Phase.COMPLETED.value, Phase.FAILED.value)


def parse(obj: Mapping[str, Any]) -> Quota:
    """One FleetQuota object as a quota; ValueError with `spec.FIELD: why` when malformed."""
    name = str((obj.get("metadata") or {}).get("name") or "")
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        raise ValueError("spec: missing (give at least spec.nominal)")
    if "name" in spec:
        raise ValueError("spec.name: not a field (the quota's name is metadata.name)")
    try:
        return QuotaSpec.model_validate({**spec, "name": name}).to_quota()
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(p) for p in err.get("loc", ()))
        msg = str(err.get("msg", "")).removeprefix("Value error, ")
        raise ValueError(f"spec.{loc}: {msg}" if loc else f"spec: {msg}") from None


def merge(file: Quotas | None, objects: Iterable[Quota]) -> Quotas:
    """The file's quotas (a FleetQuota of the same name in its place), then the other objects by name."""
    by_name = {q.name: q for q in objects}
    entries = [by_name.pop(q.name, q) for q in (file.entries if file else ())]
    return Quotas(tuple(entries) + tuple(by_name[n] for n in sorted(by_name)))


class HubQuotas:
    """The quotas the daemon applies, given the clusters file's and the hub's watch."""

    def __init__(self, file: Quotas | None, view: StagingView, book: Book, targets: Targets, interpret: Interpreter,
                 events: Recorder | None = None):
        self.file = file if file else None
        self.events = events                       # the daemon's recorder (its writes fenced by the Lease)
        self.evented: dict[str, tuple[Any, Any]] = {}     # name -> (uid, generation) told by an Event
        self.view = view
        self.book = book
        self.targets = targets
        self.interpret = interpret
        self.written: dict[str, Any] = {}          # name -> the status last written (or found)
        self.warned: dict[str, str] = {}           # name -> the problem said once
        self.soonest = self.next = 0.0             # status: not before, due at (time.monotonic)
        self.last_used: dict[str, dict[str, int]] = {}    # what the last refresh counted
        self.dirty = False                         # the daemon did work since the last refresh

    @property
    def informer(self) -> Informer | None:
        return self.view.quotas                    # started by the watches when the hub serves the kind

    def objects(self) -> list[dict]:
        return self.informer.items() if self.informer is not None else []

    def current(self) -> tuple[Quotas, dict[str, str]]:
        """The quotas in force, and the malformed objects' problems (name -> why)."""
        good, bad = [], {}
        for obj in self.objects():
            name = str((obj.get("metadata") or {}).get("name") or "")
            try:
                good.append(parse(obj))
            except ValueError as e:
                bad[name] = str(e)
                if self.warned.get(name) != bad[name]:
                    self.warned[name] = bad[name]
                    log.warning("FleetQuota %s is invalid and not applied: %s", name, bad[name])
        clash = sorted({q.name for q in good} & {q.name for q in (self.file.entries if self.file else ())})
        for name in clash:
            if self.warned.get(name) != "clash":
                self.warned[name] = "clash"
                log.info("FleetQuota %s takes the place of the clusters file's quota of that name", name)
        return merge(self.file, good), bad

    def quotas(self) -> Quotas | None:
        """The quotas in force with their committed use counted; None: no quota at all."""
        quotas, _ = self.current()
        if not quotas:
            return None
        used, _ = self.usage(quotas)
        return Quotas(quotas.entries, counted=used)

    # --- use, from the book ----------------------------------------------------------------

    def workload(self, ref: WorkloadRef, cluster: str | None) -> Workload | None:
        """The copy as its cluster's cache holds it, else the staging object, interpreted."""
        gvk = self.view.gvk_of(ref)
        cache = self.targets.caches.get(cluster or "")
        obj = cache.copy(gvk, ref.namespace, ref.name) if cache is not None and gvk else None
        obj = {**obj, "apiVersion": gvk[0], "kind": gvk[1]} if obj is not None and gvk else self.view.staged(ref)
        if obj is None:
            return None
        try:
            return self.interpret(obj, f"{cluster or 'hub'}/{ref}")
        except PlacerError:
            return None

    def usage(self, quotas: Quotas) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, int]]]:
        """(used, pending) per quota and resource it names."""
        used: dict[str, dict[str, int]] = {}
        pending: dict[str, dict[str, int]] = {}
        if not quotas:
            return used, pending               # nothing to count: nothing interpreted
        seen: set[WorkloadRef] = set()
        for ref, remote in list(self.book.placed.items()):
            staging = self.view.staged(ref)
            if staging is None or ann_of(staging).get(ANN_PHASE) in FINISHED:
                continue
            seen.add(ref)
            w = self.workload(ref, remote.cluster)
            if w is not None and w.phase not in (Phase.COMPLETED, Phase.FAILED):   # the copy's own word
                _count(quotas, used, w)
        for c in list(self.book.creating.values()):
            for w in c.group.workloads:
                if w.ref not in seen:
                    seen.add(w.ref)
                    _count(quotas, used, w)
        for ref in list(self.book.pending):
            if ref not in seen and ref not in self.book.creating:
                _count(quotas, pending, self.workload(ref, None))
        return used, pending

    # --- status ---------------------------------------------------------------------------

    def statuses(self) -> dict[str, dict[str, Any]]:
        """name -> the status each FleetQuota object should carry now."""
        quotas, bad = self.current()
        used, pending = self.usage(quotas)
        lends = lent(quotas, used)
        out: dict[str, dict[str, Any]] = {}
        for obj in self.objects():
            name = str((obj.get("metadata") or {}).get("name") or "")
            if name in bad:
                out[name] = {"conditions": [_condition(False, "Invalid", bad[name])]}
                continue
            q = quotas.get(name)
            if q is None:
                continue

            def amounts(m: Mapping[str, int], q: Quota = q) -> dict[str, str]:
                return {r: format_quantity(r, m.get(r, 0)) for r in sorted(q.nominal)}
            u = used.get(name, {})
            out[name] = {"used": amounts(u),
                         "borrowed": amounts({r: max(0, u.get(r, 0) - n) for r, n in q.nominal.items()}),
                         "lent": amounts(lends.get(name, {})), "pending": amounts(pending.get(name, {})),
                         "conditions": [_condition(True, "Applied", "applied by placer daemon")]}
        return out

    def refresh(self, hub: KubeClient, on_error: Callable[[str, Exception], None], did: bool,
                every: float, on_freed: Callable[[], None] = lambda: None) -> None:
        """After the daemon did work (at most twice a second, at least every `every` seconds):
        when a quota's use went down (a copy finished or went away), `on_freed` (what waits for
        its quota is planned again, as when capacity frees up); each FleetQuota's status brought
        up to date (written only where it changed)."""
        now = time.monotonic()
        self.dirty = self.dirty or did           # work done while rate-limited is refreshed after
        if (self.informer is None and not self.file) or not (self.dirty or now >= self.next) or now < self.soonest:
            return
        self.soonest, self.next, self.dirty = now + 0.5, now + every, False
        try:
            quotas, _ = self.current()
            used, _ = self.usage(quotas)
            if any(v > used.get(q, {}).get(r, 0) for q, u in self.last_used.items() for r, v in u.items()):
                on_freed()
            self.last_used = used
            self.write(hub, on_error)
        except Exception:                        # a report and a wake-up: they must not stop the loop
            log.exception("refreshing the quotas' use failed")

    def write(self, hub: KubeClient, on_error: Callable[[str, Exception], None]) -> int:
        """Write each FleetQuota's status where it differs from what it carries (fenced by the
        hub client); returns the number written."""
        if self.informer is None or not self.objects():
            return 0
        have = {str((o.get("metadata") or {}).get("name")): o.get("status") or {} for o in self.objects()}
        wrote = 0
        wants = self.statuses()
        self.warn_invalid(wants)
        for name, want in wants.items():
            if _same(have.get(name) or {}, want):
                continue
            patch = {**{k: None for k in have.get(name) or {} if k not in want}, **want}
            try:
                obj = hub.patch_status(self.informer.resource, name, patch)
                self.informer.assume(obj, notify=False)
                wrote += 1
            except PlacerError as e:
                on_error("hub", e)
                log.warning("FleetQuota %s: writing its status failed: %s", name, e)
        return wrote

    def warn_invalid(self, wants: Mapping[str, Mapping[str, Any]]) -> None:
        """One Warning Event `InvalidQuota` on each malformed FleetQuota, naming the field: once
        per generation of its spec (its spec's digest where the server keeps no generation), not
        every round. A quota made valid is forgotten, so breaking it again is told again."""
        if self.events is None:
            return
        for obj in self.objects():
            meta = obj.get("metadata") or {}
            name = str(meta.get("name") or "")
            cond: Mapping[str, Any] = next(iter((wants.get(name) or {}).get("conditions") or ()), {})
            if cond.get("status") != "False":
                self.evented.pop(name, None)
                continue
            generation = meta.get("generation") or hashlib.sha256(
                json.dumps(obj.get("spec"), sort_keys=True, default=str).encode()).hexdigest()[:10]
            mark = (meta.get("uid"), generation)
            if self.evented.get(name) == mark:
                continue
            self.evented[name] = mark
            self.events.record({**obj, "apiVersion": GVK[0], "kind": GVK[1]}, WARNING, INVALID_QUOTA,
                               f"FleetQuota {name} (generation {generation}) is invalid and not applied: "
                               f"{cond.get('message', '')}")


def _count(quotas: Quotas, into: dict[str, dict[str, int]], w: Workload | None) -> None:
    q = quotas.of(w) if w is not None else None
    if q is not None and w is not None:
        add_usage(into, q.name, {r: v for r, v in workload_demand(w).items() if r in q.nominal})


def _condition(ok: bool, reason: str, message: str) -> dict[str, str]:
    return {"type": "Valid", "status": "True" if ok else "False", "reason": reason, "message": message[:1000]}


def _same(have: Mapping[str, Any], want: Mapping[str, Any]) -> bool:
    """Equal but for the conditions' transition times (placer writes none)."""
    def strip(s: Mapping[str, Any]) -> dict[str, Any]:
        return {k: ([{f: x for f, x in c.items() if f != "lastTransitionTime"} for c in v] if k == "conditions"
                    else v) for k, v in s.items() if v is not None}
    return strip(have) == strip(want)
