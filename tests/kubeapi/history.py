"""One cluster's watch history: every event in resourceVersion order, indexed per resource type so
that a watcher reads (and is woken for) only its own type, and each event's object encoded once
for all the watchers that receive it."""
from __future__ import annotations

import bisect
from dataclasses import dataclass, field

from .jsonfast import dumps


@dataclass(frozen=True)
class Event:
    rv: int
    key: str                    # ResourceType.key
    type: str                   # ADDED / MODIFIED / DELETED
    obj: dict
    prev: dict | None           # the object before the change (for selector transitions)
    encoded: dict = field(default_factory=dict, compare=False, repr=False)   # apiVersion -> object JSON

    def object_json(self, api_version: str) -> bytes:
        """The object as a watcher of `api_version` sees it, encoded once for all of them (a
        multi-version CRD's watchers differ only in apiVersion)."""
        data = self.encoded.get(api_version)
        if data is None:
            obj = self.obj if self.obj.get("apiVersion") == api_version else {**self.obj, "apiVersion": api_version}
            data = self.encoded[api_version] = dumps(obj)
        return data


class History:
    """Not thread-safe: the store's lock guards it. A watcher is expired (410) when an event of its
    own type that it had not read yet was trimmed, or when the history was compacted past it: as
    the real server's per-type watch cache, traffic on other types does not expire it."""

    def __init__(self, size: int):
        self.size = size
        self.events: list[Event] = []
        self.rvs: list[int] = []
        self.compacted = 1          # oldest resourceVersion a watch or continue may start from
        self.forgotten = 1          # the resourceVersion of the last compact(): every watcher behind it expires
        self._by_key: dict[str, tuple[list[int], list[Event]]] = {}
        self._trimmed: dict[str, int] = {}      # key -> the newest resourceVersion trimmed of that type

    def record(self, ev: Event) -> None:
        self.events.append(ev)
        self.rvs.append(ev.rv)
        rvs, evs = self._by_key.setdefault(ev.key, ([], []))
        rvs.append(ev.rv)
        evs.append(ev)
        excess = len(self.events) - self.size
        if excess > max(16, self.size // 8):     # trim in batches to keep appends O(1)
            self.compacted = self.events[excess - 1].rv
            del self.events[:excess], self.rvs[:excess]
            self._trim(self.compacted)

    def _trim(self, through: int) -> None:
        for key, (rvs, evs) in self._by_key.items():
            n = bisect.bisect_right(rvs, through)
            if n:
                self._trimmed[key] = rvs[n - 1]
                del rvs[:n], evs[:n]

    def compact(self, rv: int) -> None:
        """Forget everything: watchers and continue tokens from before rv are expired."""
        self.compacted = self.forgotten = rv
        self.events.clear()
        self.rvs.clear()
        self._trim(rv)

    def newest(self, key: str) -> int:
        rvs = self._by_key.get(key)
        return rvs[0][-1] if rvs and rvs[0] else 0

    def since(self, key: str, cursor: int) -> list[Event]:
        """The events of one type after cursor, in order."""
        found = self._by_key.get(key)
        return found[1][bisect.bisect_right(found[0], cursor):] if found else []

    def expired(self, key: str, cursor: int) -> bool:
        return cursor < self.forgotten or self._trimmed.get(key, 0) > cursor
