"""`placer get quotas` (issue 23): per fleet-wide quota, what the plan of the given files
leaves it holding; every `-o` format `placer get` offers."""

from __future__ import annotations

from typing import Mapping, Sequence

from rich.markup import escape
from rich.table import Table

from placer.cli.common import err, out, run
from placer.cli.output import Output
from placer.cli.output import emit as emit_as
from placer.model.errors import InputError
from placer.model.quantity import format_quantity

KINDS = ("quotas", "quota", "fleetquotas", "fleetquota")


def is_quotas(what: str | None) -> bool:
    return what is not None and what.lower() in KINDS


def get_quotas(files: Sequence[str], fmt: Output, *, namespace: str | None, all_namespaces: bool,
               clusters: str | None, kubeconfig: str | None, contexts: Sequence[str], all_contexts: bool,
               catalog: Sequence[str], time_limit: float | None) -> None:
    def go():
        from placer.ops.quotas import quota_figures  # the solver: loaded when run

        if namespace and all_namespaces:
            raise InputError("give -n NAMESPACE or -A, not both")
        return quota_figures(files, clusters=clusters, kubeconfig=kubeconfig, contexts=tuple(contexts),
                             all_contexts=all_contexts, time_limit=time_limit, catalog_dirs=catalog,
                             namespace=namespace,
                             announce=lambda m: err.print(escape(m), style="dim"))

    figures = run(go)
    if not fmt.tabular:
        emit_as([q.to_dict() for q in figures], fmt, names=[f"quota/{q.name}" for q in figures])
        return
    t = Table("NAME", "COHORT", "NOMINAL", "USED", "BORROWED", "LENT", "PENDING", "FAIR SHARE",
              box=None, pad_edge=False)
    for q in figures:
        t.add_row(*(escape(c) for c in (q.name, q.cohort or "<none>", _amounts(q.nominal, q.nominal),
                                        _amounts(q.used, q.nominal), _amounts(q.borrowed, q.nominal),
                                        _amounts(q.lent, q.nominal), _amounts(q.pending, q.nominal),
                                        f"{float(q.fair_share):.4f}")))
    out.print(t)


def _amounts(m: Mapping[str, int], names: Mapping[str, int]) -> str:
    return ",".join(f"{r}={format_quantity(r, m.get(r, 0))}" for r in sorted(names))
