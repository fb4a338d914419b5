"""`placer get quotas` (issue 23): per fleet-wide quota, what it holds once the plan of the
given files is carried out: its committed work (placer's own copies on live clusters whose
pods are not all bound, as the plan counts promised capacity) and the files' workloads the
plan places; what it borrows and lends, what stays pending, and its fair share."""

from __future__ import annotations

from typing import Sequence

from placer.model.errors import InputError
from placer.model.quota import QuotaUse
from placer.ops.plan import Say, plan_files


def quota_figures(files: Sequence[str], *, clusters: str | None = None, kubeconfig: str | None = None,
                  contexts: tuple[str, ...] = (), all_contexts: bool = False, time_limit: float | None,
                  catalog_dirs: Sequence[str] = (), namespace: str | None = None,
                  announce: Say | None = None) -> tuple[QuotaUse, ...]:
    """The quotas' figures from the plan of `files` against the clusters file's quotas."""
    if not files:
        raise InputError("placer get quotas: give the workloads with -f (what the plan of them holds is counted)")
    result = plan_files(files, clusters=clusters, kubeconfig=kubeconfig, contexts=contexts,
                        all_contexts=all_contexts, time_limit=time_limit, catalog_dirs=catalog_dirs,
                        namespace=namespace, announce=announce)
    if not result.plan.quotas:
        raise InputError(f"{result.clusters_source}: no quotas: section (placer get quotas shows fleet-wide "
                         "quotas; docs/clusters-file.md, \"Quotas\")")
    return result.plan.quotas
