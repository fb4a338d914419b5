"""Running the daemon from the command line: its configuration from the clusters file,
durations, logging, and `run_daemon` (until SIGTERM or SIGINT)."""

from __future__ import annotations

import json
import logging
import re
import signal
import sys

from placer.daemon.core import Daemon
from placer.daemon.definitions import FleetDefinitions
from placer.daemon.leadership import LeaseTiming
from placer.daemon.state import DaemonConfig, deadline_problem
from placer.definitions.catalog import PLACER_FORMAT, Catalog
from placer.inputs.quotas import to_quotas
from placer.inputs.targets import FROM_FILE, resolve_clusters
from placer.kube import Kube, RetryPolicy
from placer.model.errors import InputError
from placer.solve.preemption import POLICIES

log = logging.getLogger("placer.daemon")


# --- logging -------------------------------------------------------------------------------

class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {"time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S") + f".{int(record.msecs):03d}",
               "level": record.levelname.lower(), "logger": record.name, "msg": record.getMessage()}
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        return json.dumps(out)


class _Stderr(logging.StreamHandler):
    """A handler on standard error as it is when a record is emitted, not as it was when the
    handler was made: a host that swaps stderr (a test runner, a CLI harness) and closes the old
    one does not leave the daemon's logging writing into a closed file."""

    @property                                   # type: ignore[override]
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _value) -> None:           # StreamHandler.__init__ sets it; always sys.stderr
        pass


def setup_logging(fmt: str = "text", level: int = logging.INFO) -> None:
    handler = _Stderr()
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    elif fmt == "text":
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    else:
        raise InputError(f"--log-format {fmt!r}: expected text or json")
    root = logging.getLogger("placer")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False


# --- running it from the command line ----------------------------------------------------

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str, option: str = "--reschedule-after") -> float:
    """`90`, `90s`, `15m`, `1h30m`, `500ms` -> seconds."""
    s = str(text).strip()
    if re.fullmatch(r"\d+(\.\d+)?", s):
        return float(s)
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", s)
    if not parts or "".join(n + u for n, u in parts) != s:
        raise InputError(f"{option} {text!r}: expected a duration such as 90s, 15m or 1h30m")
    return sum(float(n) * _UNITS[u] for n, u in parts)


def check_preemption(policy: str, rate: int, min_run_time: float) -> None:
    """`--preemption`, `--preemption-rate` and `--min-run-time`, before anything starts."""
    if policy not in POLICIES:
        raise InputError(f"--preemption {policy!r}: expected one of {', '.join(POLICIES)}")
    if isinstance(rate, bool) or not isinstance(rate, int) or rate < 1:
        raise InputError(f"--preemption-rate {rate!r}: must be a whole number of preemptions per minute, at least 1")
    if not min_run_time >= 0 or min_run_time == float("inf"):
        raise InputError(f"--min-run-time {min_run_time!r}: must be a finite duration, at least 0")


def config_from_file(clusters_file: str | None, *, batch_window: float, reschedule_after: float | None,
                     time_limit: float, kubeconfig: str | None = None,
                     request_deadline: float | None = None, preemption: str = "off", preemption_rate: int = 10,
                     min_run_time: float = 60.0) -> DaemonConfig:
    """The daemon's configuration from the clusters file's `hub:` section and live entries."""
    loaded = resolve_clusters(clusters_file, kubeconfig=kubeconfig)
    hub = loaded.hub
    if loaded.source != FROM_FILE:
        raise InputError(f"the daemon needs a clusters file with a `hub:` section (hub.context, "
                         f"hub.stagingNamespace); found {loaded.description}: pass --clusters FILE")
    if hub is None:
        raise InputError("the clusters file has no `hub:` section (hub.context, hub.stagingNamespace): "
                         "the daemon needs to know where to watch", source=loaded.description)
    live = tuple(c for c in loaded.clusters if c.context)
    if not live:
        raise InputError("no cluster entry names a context: the daemon only places on live clusters",
                         source=loaded.description)
    if batch_window < 0:
        raise InputError(f"--batch-window {batch_window}: must not be negative")
    check_preemption(preemption, preemption_rate, min_run_time)
    config = DaemonConfig(staging_namespace=hub.stagingNamespace, clusters=live, hub_context=hub.context,
                          secrets=hub.secrets, batch_window=batch_window, reschedule_after=reschedule_after,
                          time_limit=time_limit, request_deadline=request_deadline,
                          quotas=to_quotas(getattr(loaded.file, "quotas", None)),   # with the hub's FleetQuotas
                          preemption=preemption, preemption_rate=preemption_rate, min_run_time=min_run_time,
                          settle_heap=True)              # `placer daemon`: the process is the daemon's own
    if request_deadline is not None:
        check_request_deadline(request_deadline, config.lease)
    return config


def check_request_deadline(value: float, lease: LeaseTiming = LeaseTiming()) -> float:
    """`--request-deadline`, checked against the lease (every target write must end inside it)."""
    problem = deadline_problem(value, lease)
    if problem:
        raise InputError(f"--request-deadline {problem}")
    return value


STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT})


def run_daemon(config: DaemonConfig, *, kubeconfig: str | None, catalog: Catalog,
               metrics_addr: str | None, prefer: str = PLACER_FORMAT) -> None:
    """Run until SIGTERM or SIGINT, then stop cleanly (giving the lease up).

    Both signals are blocked in every thread (each inherits the mask set here, first) and
    taken by the main thread with `sigtimedwait`, not by a handler: OR-Tools' CP-SAT installs
    its own SIGINT handler for each solve and resets SIGINT to the default action after it,
    so after the first planning round a handler-based Ctrl-C killed the daemon without
    giving the Lease up (issue 25). A blocked signal waits for `sigtimedwait` whatever its
    disposition says."""
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    kube = Kube(kubeconfig, max_workers=64)
    # definitions registered on the hub (first: they win) and the target clusters, read now
    # and again on every discovery poll; each read bounded by the request deadline, so that a
    # cluster that hangs holds neither the start nor the poll (it keeps what it registered)
    bounded = Kube(kubeconfig, timeout=config.deadline, connect_timeout=config.deadline,
                   retry=RetryPolicy(connection_errors=False))
    definitions = FleetDefinitions(catalog, bounded, [config.hub_context, *(e.context for e in config.clusters)],
                                   prefer=prefer)
    daemon = Daemon(config, kube, definitions.load(), definitions=definitions)
    log.info("watching %s on %s; placing on %s", config.staging_namespace, config.hub_context or "(current)",
             ", ".join(daemon.entries))
    got = "error"
    try:
        daemon.start(metrics_addr=metrics_addr)
        got = wait_for_stop_signal()
    finally:
        log.info("stopping (%s)", got)
        outcome = daemon.stop()
        kube.close()
        bounded.close()
        log.info("stopped: %s", outcome)


def wait_for_stop_signal() -> str:
    """The name of the first of STOP_SIGNALS to arrive (blocked, so it waits here)."""
    while True:
        info = signal.sigtimedwait(STOP_SIGNALS, 1.0)
        if info is not None:
            return signal.Signals(info.si_signo).name
