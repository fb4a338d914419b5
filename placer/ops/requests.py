"""What `placer submit` and `placer describe` are asked to do, and the checks of it that
need no cluster (pure: the CLI builds these at start, before the client loads)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from placer.inputs.clusters_file import as_entry
from placer.inputs.manifests import expand_paths
from placer.inputs.targets import Targets
from placer.model.errors import InputError
from placer.ops.checks import DEFAULT_TIME_LIMIT


@dataclass(frozen=True)
class SubmitRequest:
    """What to submit and how: the files, a dry run, a cluster to pin everything to, the
    solver's bounds, and what to do with clusters that cannot be read or workloads that
    no longer fit where they live."""

    files: tuple[str, ...]
    dry_run: bool = False
    cluster: str | None = None
    time_limit: float | None = DEFAULT_TIME_LIMIT
    workers: int | None = None
    seed: int = 0
    plan_id: str | None = None
    skip_unreachable: bool = False
    replace: bool = False
    namespace: str | None = None

    def check(self) -> None:
        """Bad numbers and paths fail before the slow parts (clusters, catalog)."""
        if self.time_limit is not None and self.time_limit <= 0:
            raise InputError(f"--time-limit {self.time_limit}: must be positive")
        expand_paths(list(self.files))

    def check_clusters(self, targets: Targets) -> None:
        """The clusters resolved can take this submit (before anything is read from them)."""
        check_cluster(self.cluster, targets.clusters, dry_run=self.dry_run)


def check_cluster(cluster: str | None, entries: Sequence[Any], *, dry_run: bool = False) -> None:
    """A dry run may plan on simulated clusters (it creates nothing); a submit needs a live one."""
    names = [as_entry(e).name for e in entries]
    if not entries:
        raise InputError("no clusters to submit to (give --clusters FILE or a kubeconfig with contexts)")
    if not dry_run and not any(as_entry(e).context for e in entries):
        raise InputError("no live clusters to submit to: every cluster is simulated (give --clusters FILE "
                         "with contexts, or a kubeconfig)")
    if cluster is not None and cluster not in names:
        raise InputError(f"--cluster {cluster}: no such cluster (known: {', '.join(names)})")


@dataclass(frozen=True)
class DescribeRequest:
    """What to describe: the workloads of files, or one live object (`ref`, KIND/NAME) in
    `namespace` of the kubeconfig's `context` (None: the current one)."""

    ref: str | None = None
    files: tuple[str, ...] = ()
    namespace: str | None = None      # with files: kubectl's -n with -f (fills in, must agree)
    context: str | None = None

    def check(self) -> None:
        if bool(self.ref) == bool(self.files):
            raise InputError("give either -f FILE... or KIND/NAME (or KIND NAME)")
