"""The daemon's catalog while it runs: one holder of the current catalog, shared by every
part that reads definitions (the daemon, the interpreter, the watches, the creator, the
reconciler, the planner), and the re-reading of the definitions registered on the hub and
the targets (`WorkloadDefinition`s and Workload Map `Karta`s) that swaps it.

Each part reads `catalogs.current` when it needs a definition, so a swap serves every
later round; a round already running finishes with the catalog it read. Objects already
placed keep their copies whatever happens to their definition afterwards."""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Iterable, Mapping

from placer.definitions.catalog import PLACER_FORMAT, Catalog, CompiledDefinition
from placer.fleetview.registry import Registered, layered, read_fleet

log = logging.getLogger("placer.daemon")


class CurrentCatalog:
    """The catalog every daemon part reads (`.current`), swapped whole and atomically (a
    reference assignment: a reader sees the old catalog or the new one, never a mix)."""

    def __init__(self, catalog: Catalog):
        self._current = catalog
        self._lock = threading.Lock()

    @property
    def current(self) -> Catalog:
        return self._current

    def swap(self, catalog: Catalog) -> bool:
        """Make `catalog` current; False (and nothing done) when it serves every kind with
        the same definitions as the current one."""
        with self._lock:
            if _same(self._current, catalog):
                return False
            self._current = catalog
            return True

    def lookup(self, api_version: str, kind: str) -> CompiledDefinition | None:
        """The current catalog's definition for a kind (so the holder stands where a catalog
        is looked up, as in the interpreter)."""
        return self._current.lookup(api_version, kind)


def _same(a: Catalog, b: Catalog) -> bool:
    return (a.companion_kinds == b.companion_kinds and a.by_gvk.keys() == b.by_gvk.keys()
            and all(a.by_gvk[k] is b.by_gvk[k] for k in a.by_gvk))


class FleetDefinitions:
    """Re-reads what the hub and the targets register and layers it over the base catalog
    (built-ins and `--catalog` directories) as `placer daemon` did at its start. A cluster
    that cannot be read now keeps what it registered when it last answered: a hub that
    does not answer for a poll must not make every registered kind unknown."""

    def __init__(self, base: Catalog, kube: Any, contexts: Iterable[str | None], *,
                 prefer: str = PLACER_FORMAT, warn: Callable[[str], None] | None = None):
        self.base = base
        self.kube = kube
        self.contexts = list(dict.fromkeys(contexts))
        self.prefer = prefer
        self._warn = warn or (lambda m: log.warning("%s", m))
        self._said: set[str] = set()
        self._last: dict[str | None, Registered] = {}

    def warn(self, message: str) -> None:
        """Each warning once (the same invalid definition is read again every poll)."""
        if message not in self._said:
            self._said.add(message)
            self._warn(message)

    def load(self) -> Catalog:
        """LIST what every cluster registers (at the start; later the watches' caches are read)."""
        return self.layer(read_fleet(self.kube, self.contexts, self.warn))

    def layer(self, found: Mapping[str | None, Registered | Exception]) -> Catalog:
        """The catalog from what these contexts register now; a context missing from `found`,
        or with an error in its slot, keeps what it registered when it last answered."""
        for ctx, got in found.items():
            if isinstance(got, Registered):
                self._last[ctx] = got
        return layered(self.base, [self._last[c] for c in self.contexts if c in self._last], self.prefer)

    def refresh(self, catalogs: CurrentCatalog,
                found: Mapping[str | None, Registered | Exception] | None = None) -> bool:
        """Read the registered definitions again (`found`: as the watches hold them, no
        request; None: LIST them); True when the current catalog changed."""
        before = catalogs.current
        if not catalogs.swap(self.load() if found is None else self.layer(found)):
            return False
        old, new = before.by_gvk, catalogs.current.by_gvk
        added = sorted(k for k in new if k not in old)
        removed = sorted(k for k in old if k not in new)
        changed = sorted(k for k in new if k in old and new[k] is not old[k])
        log.info("workload definitions changed: %s",
                 "; ".join(f"{what} {', '.join(f'{a}/{k}' for a, k in kinds)}"
                           for what, kinds in (("new", added), ("gone", removed), ("changed", changed)) if kinds))
        return True
