"""`placer daemon`: place what arrives in the hub's staging namespace, and keep it placed."""

from __future__ import annotations

import signal
from typing import Callable, List, Optional

import typer

from placer.cli.common import CATALOG_HELP, app, run
from placer.ops.checks import check_number


@app.command()
def daemon(
    clusters_file: Optional[str] = typer.Option(
        None, "--clusters",
        help="Clusters file with a `hub:` section (context, stagingNamespace) and live cluster entries "
             "(default: $PLACER_CLUSTERS, ./clusters.yaml)."),
    kubeconfig: Optional[str] = typer.Option(None, "--kubeconfig", help="Kubeconfig file(s), ':'-separated."),
    metrics_addr: Optional[str] = typer.Option(
        None, "--metrics-addr", help="Serve /metrics and /healthz on HOST:PORT (e.g. :9090)."),
    log_format: str = typer.Option("text", "--log-format", help="text or json"),
    reschedule_after: Optional[str] = typer.Option(
        None, "--reschedule-after",
        help="Withdraw and re-place any workload whose pods are not all running after this long "
             "(e.g. 15m). Without it, only workloads annotated placer.dev/reschedule=\"true\" (after 10m)."),
    batch_window: float = typer.Option(0.2, "--batch-window", help="Seconds arrivals wait to be planned together."),
    time_limit: float = typer.Option(2.0, "--time-limit", help="Solver time limit per planning round, seconds."),
    request_deadline: Optional[str] = typer.Option(
        None, "--request-deadline",
        help="A target cluster that does not answer a request within this long (e.g. 3s) is degraded: "
             "planned around until it answers again (default: a third of the lease's renew deadline, 3.3s)."),
    preemption: str = typer.Option(
        "off", "--preemption",
        help="Preempt placer's own lower-priority copies for what waits unplaced: off, within-quota (the same "
             "quota), reclaim (also what other quotas borrow), priority (also lower priorities of any quota)."),
    preemption_rate: int = typer.Option(10, "--preemption-rate",
                                        help="At most this many workloads preempted per minute, fleet-wide."),
    min_run_time: str = typer.Option("60s", "--min-run-time",
                                     help="A copy placed less than this long ago (e.g. 60s, 5m) is never preempted."),
    catalog: List[str] = typer.Option([], "--catalog", help=CATALOG_HELP),
    prefer: str = typer.Option(
        "placer", "--prefer",
        help="Which definition serves a kind both a placer definition and a Workload Map Karta describe "
             "(--catalog or registered on the clusters): placer (KAI's rule) or karta."),
) -> None:
    """Watch the hub's staging namespace; place each arriving workload (batched, planned with
    everything still unplaced) on a live cluster; mirror status back; apply spec changes;
    delete copies when staging objects go. One active daemon per hub (Lease leader election)."""
    def start() -> None:
        from placer.daemon import config_from_file, parse_duration, run_daemon, setup_logging
        from placer.daemon.config import check_preemption, check_request_deadline
        from placer.daemon.metrics import parse_address
        from placer.definitions.catalog import PREFERENCES, load_catalog
        from placer.model.errors import InputError

        if prefer not in PREFERENCES:          # before anything is read or started
            raise InputError(f"--prefer {prefer!r}: expected one of {', '.join(PREFERENCES)}")
        check_number("--time-limit", time_limit)
        check_number("--batch-window", batch_window, inclusive=True)
        min_run = parse_duration(min_run_time, "--min-run-time")
        check_preemption(preemption, preemption_rate, min_run)
        setup_logging(log_format)
        addr = parse_address(metrics_addr) if metrics_addr else None
        after = parse_duration(reschedule_after) if reschedule_after else None
        deadline = check_request_deadline(parse_duration(request_deadline, "--request-deadline")) \
            if request_deadline is not None else None
        config = config_from_file(clusters_file, batch_window=batch_window, reschedule_after=after,
                                  time_limit=time_limit, kubeconfig=kubeconfig, request_deadline=deadline,
                                  preemption=preemption, preemption_rate=preemption_rate, min_run_time=min_run)
        run_daemon(config, kubeconfig=kubeconfig, catalog=load_catalog(catalog, prefer=prefer), metrics_addr=addr,
                   prefer=prefer)
    run(lambda: _stop_signals_blocked(start))


def _stop_signals_blocked(start: Callable[[], None]) -> None:
    """`start` with SIGINT and SIGTERM blocked from the first, before anything starts a thread
    (reading the clusters file and the catalog may, and so may a library at import): every
    thread inherits the mask, and run_daemon takes both in this thread with sigtimedwait."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
