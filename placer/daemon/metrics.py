"""The daemon's metrics (prometheus_client, on a private registry) and its `/metrics` +
`/healthz` server.

The registry is the daemon's own, so two daemons in one process (tests, benchmarks)
never share series; it carries the standard process and platform collectors and a
`placer_build_info`. Every unlabelled series exists from the start, at 0.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import metadata
from typing import Any, Callable, Iterable, Mapping

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from placer.model.errors import InputError

CONTENT_TYPE = CONTENT_TYPE_LATEST
SOLVE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


def versions() -> dict[str, str]:
    """placer's version and its engines' (OR-Tools, jq's binding), as installed."""
    out = {}
    for dist, key in (("placer", "version"), ("ortools", "ortools"), ("jq", "jq")):
        try:
            out[key] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[key] = "unknown"
    return out


class _Totals(Collector):
    """A counter whose totals are kept elsewhere (the Interpreter counts its own hits and
    misses) and set here: exposed with counter semantics, never decremented by us."""

    def __init__(self, name: str, help: str, labelnames: tuple[str, ...]):
        self.name, self.help, self.labelnames = name, help, labelnames
        self.values: dict[tuple[str, ...], float] = {}

    def collect(self) -> Iterable[CounterMetricFamily]:
        family = CounterMetricFamily(self.name.removesuffix("_total"), self.help, labels=self.labelnames)
        for labels, value in sorted(self.values.items()):
            family.add_metric(labels, value)
        yield family


class Metrics:
    """The daemon's series by their exposed names; `inc`/`set`/`observe`/`value` keep the
    daemon's calls independent of the client library's types. Thread-safe (the client is)."""

    def __init__(self):
        self.registry = CollectorRegistry(auto_describe=True)
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        r = self.registry
        self._series: dict[str, Counter | Gauge | Histogram | _Totals] = {
            "placer_placements_total": Counter("placer_placements", "Workloads created on a target cluster",
                                               registry=r),
            "placer_withdrawals_total": Counter("placer_withdrawals", "Placed workloads withdrawn to be rescheduled",
                                                registry=r),
            "placer_unplaced": Gauge("placer_unplaced", "Staging workloads waiting for capacity", registry=r),
            "placer_placed": Gauge("placer_placed", "Staging workloads with a remote copy", registry=r),
            "placer_queue_depth": Gauge("placer_queue_depth", "Keys waiting in the reconcile queue", registry=r),
            "placer_leader": Gauge("placer_leader", "1 while this daemon holds the leader lease", registry=r),
            "placer_degraded_clusters": Gauge("placer_degraded_clusters", "Target clusters degraded: no answer "
                                              "within the request deadline, until they answer again", registry=r),
            "placer_api_errors_total": Counter("placer_api_errors", "Failed Kubernetes API calls, per cluster",
                                               ["cluster"], registry=r),
            "placer_solves_total": Counter("placer_solves", "Planning rounds: round=arrivals (new arrivals placed "
                                           "against the committed plan) or full (every pending group solved)",
                                           ["round"], registry=r),
            "placer_preemptions_total": Counter("placer_preemptions", "Workloads preempted (issue 23), per policy",
                                                ["policy"], registry=r),
            "placer_solve_seconds": Histogram("placer_solve_seconds", "Seconds per planning round's solve",
                                              buckets=SOLVE_BUCKETS, registry=r),
        }
        totals = _Totals("placer_interpretations_total", "Objects interpreted (result=computed) or answered "
                         "from memory, unchanged (result=remembered)", ("result",))
        r.register(totals)
        self._series[totals.name] = totals
        Info("placer_build", "placer's version and its engines'", registry=r).info(versions())
        self._lock = threading.Lock()

    def _child(self, name: str, labels: Mapping[str, str] | None) -> Any:      # a Counter, Gauge or Histogram (child)
        metric = self._series[name]
        assert not isinstance(metric, _Totals), f"{name}: its totals are kept elsewhere and set"
        return metric.labels(**labels) if labels else metric

    def inc(self, name: str, by: float = 1, labels: Mapping[str, str] | None = None) -> None:
        self._child(name, labels).inc(by)

    def set(self, name: str, value: float, labels: Mapping[str, str] | None = None) -> None:
        metric = self._series[name]
        if isinstance(metric, _Totals):
            with self._lock:
                metric.values[tuple((labels or {})[k] for k in metric.labelnames)] = value
        else:
            self._child(name, labels).set(value)

    def observe(self, name: str, value: float) -> None:
        metric = self._series[name]
        assert isinstance(metric, Histogram), f"{name} is not a histogram"
        metric.observe(value)

    def value(self, name: str, labels: Mapping[str, str] | None = None) -> float:
        """The current value (for a histogram: its count), read back from the registry."""
        sample = name + "_count" if isinstance(self._series[name], Histogram) else name
        found = self.registry.get_sample_value(sample, dict(labels or {}))
        return found or 0

    def render(self) -> str:
        return generate_latest(self.registry).decode()


class MetricsServer:
    """`/metrics` and `/healthz` on HOST:PORT (port 0 picks a free one)."""

    def __init__(self, metrics: Metrics, address: str, healthy: Callable[[], tuple[bool, str]]):
        host, _, port = address.rpartition(":")
        self.metrics = metrics
        self.healthy = healthy
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:       # the daemon logs; not every scrape
                pass

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._reply(200, outer.metrics.render(), CONTENT_TYPE)
                elif path in ("/healthz", "/livez", "/readyz"):
                    ok, why = outer.healthy()
                    self._reply(200 if ok else 503, why + "\n", "text/plain; charset=utf-8")
                else:
                    self._reply(404, "not found\n", "text/plain; charset=utf-8")

            def _reply(self, code: int, text: str, ctype: str) -> None:
                body = text.encode()
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        try:
            self._httpd = ThreadingHTTPServer((host or "127.0.0.1", int(port or 0)), Handler)
        except OSError as e:        # a busy port, an address not on this machine
            raise InputError(f"--metrics-addr {address}: cannot listen: {e.strerror or e}") from None
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"{host.decode() if isinstance(host, bytes) else host}:{port}"

    def start(self) -> "MetricsServer":
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.1},
                                        name="placer-metrics", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def parse_address(text: str) -> str:
    """HOST:PORT as given to --metrics-addr (":9090" means every interface)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise InputError(f"--metrics-addr {text!r}: expected HOST:PORT")
    return f"{host or '0.0.0.0'}:{port}"

