"""Which clusters a command works on: one rule for every command.

In order, the first that applies:

1. `--clusters FILE`;
2. `$PLACER_CLUSTERS`;
3. `./clusters.yaml`;
4. the kubeconfig's contexts, as kubectl takes them: the current context by default,
   `--context NAME` (repeatable) for those, `--all-contexts` for every one;
5. only when there is no kubeconfig at all (neither `--kubeconfig` nor `$KUBECONFIG` given,
   and no ~/.kube/config): the bundled example fleet (simulated), which the caller must
   announce on stderr (`Targets.notice`).

With a clusters file, `--context` keeps the entries naming those contexts (or clusters).

No silent fallback: a kubeconfig that is asked for (`--kubeconfig`, `$KUBECONFIG`, each
file of a `:`-separated list) but missing or unreadable, and a clusters file naming a
context (its hub's or a cluster's) that the kubeconfig lacks, are bad input (`InputError`,
exit 2) before anything is read from a cluster. A cluster that does not answer is an
outage, reported per cluster by the command, not here.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

from placer.inputs.clusters_file import (
    DEFAULT_NAME,
    ENV,
    EXAMPLE_NAME,
    ClusterEntry,
    ClustersFile,
    Hub,
    context_entry,
    example_path,
    read_clusters_file,
)
from placer.model.errors import InputError

if TYPE_CHECKING:                 # the client loads only when a kubeconfig is read
    from placer.kube import KubeConfig

FROM_FILE, FROM_KUBECONFIG, FROM_EXAMPLE = "file", "kubeconfig", "example"


@dataclass(frozen=True)
class Targets:
    """The clusters in effect, where they came from, and what to tell the user."""

    file: ClustersFile
    description: str                  # e.g. "./clusters.yaml", "kubeconfig context kind-east"
    source: str                       # file | kubeconfig | example
    notice: str | None = None         # said on stderr (the bundled fleet is never used silently)
    # the kubeconfig read to check the clusters file's contexts (handed on: read once per command)
    kubeconfig: KubeConfig | None = field(default=None, compare=False)

    @property
    def clusters(self) -> list[ClusterEntry]:
        return self.file.clusters

    @property
    def hub(self) -> Hub | None:
        return self.file.hub

    @property
    def live(self) -> list[ClusterEntry]:
        return [c for c in self.file.clusters if c.context]


def resolve_clusters(clusters: str | None = None, *, kubeconfig: str | None = None,
                     contexts: Sequence[str] = (), all_contexts: bool = False,
                     env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Targets:
    """The clusters for any command (see the module docstring for the rule)."""
    env = os.environ if env is None else env
    if contexts and all_contexts:
        raise InputError("give --context NAME or --all-contexts, not both")
    path, description = _clusters_file(clusters, env, cwd or Path.cwd())
    if path is not None:
        file = read_clusters_file(path)
        if contexts:
            file = _select(file, contexts, description)
        return Targets(file, description, FROM_FILE, kubeconfig=_check_contexts(file, path, kubeconfig))
    found = _kubeconfig_contexts(kubeconfig)
    if found is None:
        if contexts or all_contexts:        # asked for contexts: the example fleet would ignore the request
            raise InputError(f"{'--context ' + contexts[0] if contexts else '--all-contexts'}: there is no "
                             "kubeconfig ($KUBECONFIG, ~/.kube/config or --kubeconfig)")
        return _example()
    names, current = found
    if all_contexts:
        chosen = names
    elif contexts:
        unknown = [c for c in contexts if c not in names]
        if unknown:
            raise InputError(f"--context {unknown[0]}: no such context in the kubeconfig "
                             f"(known: {', '.join(names)})")
        chosen = list(dict.fromkeys(contexts))
    else:
        if not current or current not in names:
            raise InputError("the kubeconfig has no current context: pass --context NAME (repeatable) "
                             "or --all-contexts")
        chosen = [current]
    what = "context" if len(chosen) == 1 else "contexts"
    file = ClustersFile.model_construct(hub=None, clusters=[context_entry(n) for n in chosen])
    return Targets(file, f"kubeconfig {what} {', '.join(chosen)}", FROM_KUBECONFIG)


def _clusters_file(option: str | None, env: Mapping[str, str], cwd: Path) -> tuple[str | None, str]:
    if option:
        return option, option
    if env.get(ENV):
        return env[ENV], f"{env[ENV]} (from ${ENV})"
    local = cwd / DEFAULT_NAME
    if local.is_file():
        return str(local), f"./{DEFAULT_NAME}"
    return None, ""


def _select(file: ClustersFile, contexts: Sequence[str], description: str) -> ClustersFile:
    """The entries naming these contexts (or clusters)."""
    chosen = []
    for c in contexts:
        entry = next((e for e in file.clusters if c in (e.context, e.name)), None)
        if entry is None:
            raise InputError(f"--context {c}: no cluster of {description} has that context or name")
        if entry not in chosen:
            chosen.append(entry)
    return ClustersFile.model_construct(hub=file.hub, clusters=chosen, quotas=file.quotas)


def _check_contexts(file: ClustersFile, path: str, kubeconfig: str | None) -> KubeConfig | None:
    """The kubeconfig, read when the clusters file names contexts (its hub's, its live
    clusters'); each of them must be there. None when the file is all simulated."""
    named = ([("hub.context", file.hub.context)] if file.hub else []) + \
        [(f"clusters[{i}].context", c.context) for i, c in enumerate(file.clusters) if c.context]
    if not named:
        return None
    from placer.kube import KubeConfig  # the client loads only when a kubeconfig is read

    try:
        config = KubeConfig(kubeconfig)
    except InputError as e:
        field, context = named[0]
        raise InputError(f"{field} {context}: {e}", source=path) from None
    known, _ = config.contexts()
    for field, context in named:
        if context not in known:
            raise InputError(f"{field}: context {context!r} is not in the kubeconfig {config.path} "
                             f"(known: {', '.join(known) or 'none'})", source=path)
    return config


def _kubeconfig_contexts(kubeconfig: str | None) -> tuple[list[str], str | None] | None:
    """(contexts, current), or None when there is no kubeconfig at all (none given, no
    ~/.kube/config). A kubeconfig given (`--kubeconfig`, `$KUBECONFIG`) must be readable,
    every file of it; one that exists but is broken is an error too."""
    from placer.kube import kubeconfig_exists, kubeconfig_paths, list_contexts  # loaded only when read

    if not kubeconfig_exists(kubeconfig):
        return None
    names, current = list_contexts(kubeconfig)
    if not names:
        raise InputError("the kubeconfig has no contexts", source=kubeconfig_paths(kubeconfig))
    return names, current


def _example() -> Targets:
    example = example_path()
    if not example.is_file():
        raise InputError(f"no clusters: pass --clusters FILE, set ${ENV}, create ./{DEFAULT_NAME} "
                         "or configure a kubeconfig")
    file = read_clusters_file(example).without_live()
    return Targets(file, f"the bundled example fleet ({EXAMPLE_NAME})", FROM_EXAMPLE,
                   notice=f"no clusters file and no kubeconfig: using the bundled example fleet, "
                          f"simulated clusters from {EXAMPLE_NAME} (pass --clusters FILE, set ${ENV}, "
                          f"create ./{DEFAULT_NAME} or configure a kubeconfig to use real clusters)")
