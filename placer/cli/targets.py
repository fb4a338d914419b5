"""The cluster options every command shares, and the command's one Context built from
them (`placer.ops.context.open_context`, which applies the one rule of
`placer.inputs.targets.resolve_clusters`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional, Sequence

import typer

from placer.cli.common import note, warn

if TYPE_CHECKING:                 # placer.ops.context brings the Kubernetes client: loaded when a command runs
    from placer.inputs.targets import Targets
    from placer.ops.context import Context

CLUSTERS_HELP = ("Clusters file. Default: $PLACER_CLUSTERS, ./clusters.yaml, else the kubeconfig's "
                 "current context (see --context, --all-contexts), else (no kubeconfig at all) the "
                 "bundled example fleet.")


def clusters_option():
    return typer.Option(None, "--clusters", help=CLUSTERS_HELP)


def kubeconfig_option():
    return typer.Option(None, "--kubeconfig", help="Kubeconfig file(s), ':'-separated. Default: $KUBECONFIG.")


def context_option():
    return typer.Option([], "--context", help="Kubeconfig context to use; repeatable. Default: the current one.")


def all_contexts_option():
    return typer.Option(False, "--all-contexts", help="Use every context of the kubeconfig.")


def open_ctx(clusters: Optional[str], kubeconfig: Optional[str], contexts: Sequence[str] = (),
             all_contexts: bool = False, catalog: Sequence[str] = (), gpu: Sequence[str] | None = None,
             check: Callable[[Targets], None] | None = None) -> Context:
    """The command's one Context (`placer.ops.context.open_context`): the clusters' notice
    and unusable definitions said on stderr; `check` runs on the clusters before anything
    is read. Close it (`with`) when done."""
    from placer.ops.context import Scope, open_context

    scope = Scope(clusters, kubeconfig, tuple(contexts), all_contexts, tuple(catalog), *([tuple(gpu)] if gpu else []))
    return open_context(scope, warn=warn, notice=note, check=check)
