"""Spread workloads in the daemon (`placer.dev/spread`, issue 21): one copy per share.

The staging object records where its shares are (`placer.dev/placed-shares`: "a,b,c" for
`duplicate`, "east=7,west=5" for `divide`), written when a round decides them, before the
creates start, so that a restarted daemon reads the same intent back. From that record and
the caches, each pass:

- deletes a copy on a cluster the record no longer names (its share was re-placed while
  that cluster was away), once that cluster answers;
- finds the shares that are lost: the cluster left the clusters file, has failed for longer
  than the failure window (degraded or not answering), or answers and holds no copy (deleted
  out of band, or its create failed); those are planned again (`for_planning`): `duplicate`
  as that many copies on clusters holding none, `divide` as the lost replicas among the
  clusters that are left (a share there grows). Copies on healthy clusters stay where they are;
- mirrors the copies' status: ready replicas summed, the phase the worst of the copies (the
  definition's phase rules), one entry per copy in `placer.dev/shares-status`.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from placer.daemon.actions import Annotate, Create, Delete, MirrorStatus, Record
from placer.daemon.events import NORMAL, WARNING
from placer.daemon.state import ann_of
from placer.daemon.targets import Interpret
from placer.daemon.workbench import Workbench
from placer.definitions.scale import share_object
from placer.model.errors import PlacerError
from placer.model.names import (
    ANN_MESSAGE,
    ANN_PHASE,
    ANN_SPREAD_CLUSTERS,
    ANN_SPREAD_MIN_REPLICAS,
    ANN_SPREAD_WEIGHTS,
    PLACED_SHARES,
    SHARES_STATUS,
)
from placer.model.plan import Placement
from placer.model.spread import DIVIDE, Spread, spread_of
from placer.model.workload import Phase, PlacementGroup, Workload, WorkloadRef

log = logging.getLogger("placer.daemon")

SHARE_LOST, STALE_COPY_DELETED = "ShareLost", "StaleCopyDeleted"
AGAIN = "~again"                          # the name lost shares are planned under (`renamed`)
# the worst first: the phase a spread workload reports is its worst copy's
WORST = (Phase.FAILED.value, Phase.UNKNOWN.value, Phase.PENDING.value, Phase.INITIALIZING.value,
         Phase.RUNNING.value, Phase.COMPLETED.value)

Record_ = dict[str, int | None]          # cluster -> replicas (None: a duplicate's full copy)


# --- the record on the staging object ------------------------------------------------------

def read_shares(ann: Mapping[str, str]) -> Record_:
    """cluster -> replicas from `placer.dev/placed-shares` (empty when absent or unreadable)."""
    out: Record_ = {}
    for item in str(ann.get(PLACED_SHARES) or "").split(","):
        name, _, n = item.strip().partition("=")
        if name:
            out[name] = int(n) if n.strip().isdigit() else None
    return out


def render_shares(shares: Mapping[str, int | None]) -> str:
    return ",".join(c if n is None else f"{c}={n}" for c, n in shares.items())


def is_spread(w: Workload) -> Spread | None:
    return spread_of(w.annotations, w.key, w.source)


def share_create(c: Create) -> bool:
    """A Create of one share of a spread workload (the plan gave its placements `spread`)."""
    return any(p.spread is not None for p in c.placements)


def renamed(w: Workload) -> Workload:
    """Lost shares planned again under a name of their own: the copies that stay are
    committed under the workload's own name, and the solver's checks count by name."""
    s = w.scaling
    if s is not None:
        s = dataclasses.replace(s, unit=dataclasses.replace(s.unit, name=s.unit.name + AGAIN),
                                fixed=dataclasses.replace(s.fixed, name=s.fixed.name + AGAIN))
    return dataclasses.replace(w, name=w.name + AGAIN, scaling=s)


def _named_back(p: Placement, ref: WorkloadRef) -> Placement:
    if p.ref is None or p.ref != dataclasses.replace(ref, name=ref.name + AGAIN):
        return p
    return dataclasses.replace(p, ref=ref, workload=p.workload[: -len(AGAIN)])


# --- status ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class CopyState:
    cluster: str
    replicas: int | None
    ready: int | None
    phase: str
    status: Mapping[str, Any] | None = None
    lost: str = ""                        # why the share is lost (empty: it is not)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"cluster": self.cluster, "replicas": self.replicas, "ready": self.ready,
                               "phase": self.phase}
        return {**out, "lost": self.lost} if self.lost else out


def ready_of(status: Mapping[str, Any] | None) -> int | None:
    """Ready replicas a copy reports (`readyReplicas`, else `ready`); None when it says none."""
    for key in ("readyReplicas", "ready"):
        value = (status or {}).get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def worst(phases: Iterable[str]) -> str:
    found = list(phases)
    rank = {p: i for i, p in enumerate(WORST)}
    return min(found, key=lambda p: rank.get(p, 1)) if found else Phase.PENDING.value


def aggregate(states: Sequence[CopyState]) -> dict[str, Any] | None:
    """The staging object's status: the worst copy's, with every top-level count (an integer
    field, generations aside) summed over the copies, so `readyReplicas` is the total ready."""
    seen = [s for s in states if s.status is not None and not s.lost]
    if not seen:
        return None
    bad = worst(s.phase for s in seen)
    out = copy.deepcopy(dict(next(s for s in seen if s.phase == bad).status or {}))
    for key, value in list(out.items()):
        if isinstance(value, int) and not isinstance(value, bool) and "eneration" not in key:
            out[key] = sum(v for s in seen if isinstance(v := (s.status or {}).get(key), int))
    return out


def summary(mode: str, states: Sequence[CopyState]) -> str:
    live = [s for s in states if not s.lost]
    where = ", ".join(f"{s.cluster}" + (f"={s.replicas}" if s.replicas is not None else "") for s in live)
    ready = [s.ready for s in live if s.ready is not None]
    text = f"spread ({mode}) on {where or 'no cluster'}"
    if ready:
        text += f": {sum(ready)} ready"
    lost = [f"{s.cluster} ({s.lost})" for s in states if s.lost]
    return text + (f"; lost: {'; '.join(lost)}" if lost else "")


# --- the keeper ----------------------------------------------------------------------------

@dataclass(eq=False)
class SpreadKeeper:
    """Keeps each spread workload's copies: given the workbench, the clusters-file entries,
    the interpreter and the failure window (seconds a cluster may fail before its shares are
    re-placed)."""

    bench: Workbench
    entries: Mapping[str, Any]
    interpret: Interpret
    window: float
    failing: dict[str, float] = field(default_factory=dict)     # cluster -> failing since (our clock)
    records: dict[WorkloadRef, frozenset[str]] = field(default_factory=dict)   # ref -> its clusters
    told: dict[WorkloadRef, frozenset[str]] = field(default_factory=dict)      # lost shares said
    past: set[str] = field(default_factory=set)              # failing for longer than the window

    # --- what the daemon's loop asks ---------------------------------------------------------

    def tick(self, now: float) -> None:
        """Each step: note which clusters fail since when; a spread workload with a share on
        one that crossed the failure window, or came back, is looked at again."""
        changed = set()
        for name, cache in self.bench.targets.caches.items():
            if cache.error:
                since = self.failing.setdefault(name, now)
                if now - since >= self.window and name not in self.past:
                    self.past.add(name)
                    changed.add(name)
            elif self.failing.pop(name, None) is not None:
                self.past.discard(name)
                changed.add(name)
        for ref, clusters in self.records.items():
            if clusters & changed:
                self.bench.queue.add(ref, now)

    def lost(self, record: Mapping[str, int | None], copies: Mapping[str, dict]) -> dict[str, str]:
        """cluster -> why, for each recorded share that is gone."""
        out = {}
        usable = set(self.bench.targets.usable())
        now = self.bench.clock.now()
        for c in record:
            cache = self.bench.targets.caches.get(c)
            if c not in self.entries or cache is None:
                out[c] = f"{c} is not in the clusters file any more"
            elif cache.error:
                since = self.failing.get(c)
                if since is not None and now - since >= self.window:
                    out[c] = f"{c} failing for {now - since:.0f}s ({cache.error})"
            elif c in usable and c not in copies:
                out[c] = f"no copy on {c} (deleted by someone else, or never made)"
        return out

    # --- one spread workload -------------------------------------------------------------------

    def reconcile(self, ref: WorkloadRef, staging: dict, w: Workload, spec: Spread,
                  copies: list[tuple[str, dict]]) -> bool:
        """Keep `ref`'s copies; True when it has to be planned (placed fresh, or shares lost)."""
        held = dict(copies)
        record = read_shares(ann_of(staging))
        if not record and held:
            record = self.adopt(ref, staging, held, spec)
        self.records[ref] = frozenset(record) | frozenset(held)
        if not record:
            return True
        healthy = {c for c, cache in self.bench.targets.caches.items() if not cache.error}
        stale = [c for c in held if c not in record and c in healthy]
        for c in stale:
            why = f"its share was placed elsewhere ({render_shares(record)})"
            self.bench.executor.perform([Delete(c, ref, why),
                                         Record(ref, NORMAL, STALE_COPY_DELETED, f"deleted the copy on {c}: {why}")])
        lost = self.lost(record, held)
        usable = set(self.bench.targets.usable())
        if any(c not in usable and not self.away(c) for c in record):
            self.bench.queue.add(ref, self.bench.clock.now() + 1.0)     # a cluster still listing: look again
        if lost and self.told.get(ref) != frozenset(lost):
            self.told[ref] = frozenset(lost)
            self.bench.book.pending.pop(ref, None)       # news: planned again in the next round, not at the retry
            text = "; ".join(lost.values())
            log.info("%s: shares lost: %s; placing them again", ref, text)
            self.bench.executor.perform([Record(ref, WARNING, SHARE_LOST, f"share lost: {text}; placing it again")])
        elif not lost:
            self.told.pop(ref, None)
        self.mirror(ref, staging, spec, record, held, lost)
        return bool(lost)

    def adopt(self, ref: WorkloadRef, staging: dict, held: Mapping[str, dict], spec: Spread) -> Record_:
        """Copies and no record (a daemon stopped between a create and the record): theirs."""
        record: Record_ = {}
        for c, obj in held.items():
            record[c] = None
            if spec.mode == DIVIDE:
                try:
                    s = self.interpret(obj, f"{c}/{ref}").scaling
                    record[c] = sum(s.replicas) if s else None
                except PlacerError:
                    pass
        log.info("%s: adopting its copies on %s", ref, ", ".join(record))
        self.bench.executor.perform([Annotate(ref, {PLACED_SHARES: render_shares(record)}, finalizer=True)])
        return record

    def mirror(self, ref: WorkloadRef, staging: dict, spec: Spread, record: Record_,
               held: Mapping[str, dict], lost: Mapping[str, str]) -> None:
        states = []
        for c, n in record.items():
            remote = held.get(c)
            phase, status = Phase.UNKNOWN.value, None
            if remote is not None:
                status = remote.get("status")
                try:
                    phase = self.interpret(remote, f"{c}/{ref}").phase.value
                except PlacerError:
                    pass
            states.append(CopyState(c, n, ready_of(status), phase, status, lost.get(c, "")))
        live = [s for s in states if not s.lost]
        phase = worst(s.phase for s in live) if live else Phase.PENDING.value
        breakdown = json.dumps([s.to_dict() for s in states], separators=(",", ":"))
        message = summary(spec.mode, states)
        waiting = self.bench.book.pending.get(ref)
        if lost and waiting is not None and waiting.message:      # why the lost shares are not placed yet
            message += f" | {waiting.message}"
        self.bench.executor.perform([
            MirrorStatus(ref, ", ".join(s.cluster for s in live) or "no cluster", aggregate(states)),
            Annotate(ref, {ANN_PHASE: phase, ANN_MESSAGE: message[:1000],
                           SHARES_STATUS: breakdown}, finalizer=True)])

    # --- planning ------------------------------------------------------------------------------

    def for_planning(self, ref: WorkloadRef, staging: dict, w: Workload) -> tuple[Workload, frozenset[str]] | None:
        """What a round plans for `ref`: the whole spread when nothing is recorded; else the
        lost shares (and the clusters they may not go to: those away, and for `duplicate` those
        holding a copy); None when nothing is lost. A cluster that answers and lost its copy
        (deleted, or its create failed) may have it again."""
        spec = is_spread(w)
        record = read_shares(ann_of(staging))
        if spec is None or not record:
            return w, frozenset()
        held = dict(self.bench.targets.copies_of(ref))
        lost = self.lost(record, held)
        if not lost:
            return None
        away = frozenset(c for c in lost if self.away(c))
        if set(lost) == set(record):              # nothing left (a restart before any create): all of it again
            return w, away
        obj = copy.deepcopy(dict(staging))
        ann = obj.setdefault("metadata", {}).setdefault("annotations", {})
        if spec.mode == DIVIDE and w.scaling is not None:
            wanted = sum(record[c] or 0 for c in lost)
            if wanted <= 0:
                return None
            obj = share_object(obj, w.scaling, wanted)
            ann = obj["metadata"]["annotations"]
            for name in (ANN_SPREAD_WEIGHTS, ANN_SPREAD_CLUSTERS, ANN_SPREAD_MIN_REPLICAS):
                ann.pop(name, None)          # the lost replicas, anywhere that is left, as few clusters as hold them
            return renamed(self.interpret(obj, str(ref))), away
        ann[ANN_SPREAD_CLUSTERS] = str(len(lost))
        return renamed(self.interpret(obj, str(ref))), frozenset(c for c in record if c not in lost) | away

    def away(self, cluster: str) -> bool:
        """Not in the clusters file, or failing (degraded, refusing, not answering)."""
        cache = self.bench.targets.caches.get(cluster)
        return cluster not in self.entries or cache is None or bool(cache.error)

    def claim(self, creates: Sequence[Create]) -> list[Create]:
        """A round's creates of shares, recorded on their staging objects before they start
        (the lost shares they replace dropped, a share that grows given its new size); a
        workload whose record cannot be written starts none (planned again next round)."""
        out: list[Create] = []
        by_ref: dict[WorkloadRef, list[Create]] = {}
        for c in creates:
            if not share_create(c):
                out.append(c)
                continue
            by_ref.setdefault(c.members[0], []).append(c)
        for ref, cs in by_ref.items():
            started = self._claim(ref, cs)
            out += started
        return out

    def _claim(self, ref: WorkloadRef, creates: list[Create]) -> list[Create]:
        staging = self.bench.view.staged(ref)
        if staging is None:
            return []
        record = read_shares(ann_of(staging))
        lost = self.lost(record, dict(self.bench.targets.copies_of(ref))) if record else {}
        new: Record_ = {c: n for c, n in record.items() if c not in lost}
        out = []
        for c in creates:
            c = dataclasses.replace(c, placements=tuple(_named_back(x, ref) for x in c.placements))
            p = next((x for x in c.placements if x.ref == ref), None)
            if p is None:
                continue
            if p.replicas is None:
                new[c.cluster] = None
            else:
                grown = (new.get(c.cluster) or 0) + p.replicas
                new[c.cluster] = grown
                c = dataclasses.replace(c, placements=tuple(
                    dataclasses.replace(x, replicas=grown) if x is p else x for x in c.placements))
            out.append(c)
        try:
            self.bench.executor.perform([Annotate(ref, {PLACED_SHARES: render_shares(new)}, finalizer=True)])
        except PlacerError as e:
            self.bench.executor.on_error("hub", e)
            self.bench.book.open_window(self.bench.clock.now())
            return []
        self.records[ref] = frozenset(new)
        self.told.pop(ref, None)
        return out

    def share_group(self, group: PlacementGroup, c: Create) -> PlacementGroup:
        """The demand one share promises on its cluster while its create is in flight."""
        p = next((x for x in c.placements if x.replicas is not None), None)
        w = group.workloads[0]
        if p is None or p.replicas is None or w.scaling is None or len(group.workloads) != 1:
            return group
        try:
            one = self.interpret(share_object(w.obj, w.scaling, p.replicas), str(w.ref))
        except PlacerError:
            return group
        return dataclasses.replace(group, workloads=(one,))

    def forget(self, ref: WorkloadRef) -> None:
        self.records.pop(ref, None)
        self.told.pop(ref, None)
