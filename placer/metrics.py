"""The daemon's metrics in Prometheus text format, and its `/metrics` + `/healthz` server.

A tiny registry (counters, gauges, a histogram; optional labels) instead of a client
library: the daemon exports a handful of series, and the standard library's http.server
is enough to serve them.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Mapping

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
SOLVE_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

Labels = tuple[tuple[str, str], ...]


def _labels(labels: Mapping[str, str] | None) -> Labels:
    return tuple(sorted((labels or {}).items()))


def _render_labels(labels: Labels, extra: Labels = ()) -> str:
    pairs = labels + extra
    if not pairs:
        return ""
    body = ",".join(f'{k}="{_escape(v)}"' for k, v in pairs)
    return "{" + body + "}"


def _escape(value: str) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(v: float) -> str:
    if v == float("inf"):
        return "+Inf"
    return repr(float(v)) if isinstance(v, float) and not float(v).is_integer() else str(int(v))


@dataclass
class _Metric:
    name: str
    help: str
    kind: str                                   # counter | gauge
    values: dict[Labels, float] = field(default_factory=dict)

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.kind}"]
        for labels, v in sorted(self.values.items()):
            lines.append(f"{self.name}{_render_labels(labels)} {_number(v)}")
        return lines


@dataclass
class _Histogram:
    name: str
    help: str
    buckets: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    total: float = 0.0
    n: int = 0

    def observe(self, v: float) -> None:
        if not self.counts:
            self.counts = [0] * len(self.buckets)
        for i, b in enumerate(self.buckets):
            if v <= b:
                self.counts[i] += 1
        self.total += v
        self.n += 1

    def render(self) -> list[str]:
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} histogram"]
        counts = self.counts or [0] * len(self.buckets)
        for b, c in zip(self.buckets, counts):
            lines.append(f'{self.name}_bucket{{le="{_number(b)}"}} {c}')
        lines.append(f'{self.name}_bucket{{le="+Inf"}} {self.n}')
        lines.append(f"{self.name}_sum {_number(round(self.total, 6))}")
        lines.append(f"{self.name}_count {self.n}")
        return lines


class Metrics:
    """The daemon's series. Thread-safe; `render()` gives the exposition text."""

    def __init__(self):
        self._lock = threading.Lock()
        self._metrics: dict[str, _Metric | _Histogram] = {}
        self.counter("placer_placements_total", "Workloads created on a target cluster")
        self.counter("placer_withdrawals_total", "Placed workloads withdrawn to be rescheduled")
        self.gauge("placer_unplaced", "Staging workloads waiting for capacity")
        self.gauge("placer_placed", "Staging workloads with a remote copy")
        self.gauge("placer_queue_depth", "Keys waiting in the reconcile queue")
        self.gauge("placer_leader", "1 while this daemon holds the leader lease")
        self.counter("placer_api_errors_total", "Failed Kubernetes API calls, per cluster")
        self.counter("placer_solves_total", "Planning rounds")
        self.counter("placer_interpretations_total",
                     "Objects interpreted (result=computed) or answered from memory, unchanged (result=remembered)")
        self._metrics["placer_solve_seconds"] = _Histogram(
            "placer_solve_seconds", "Seconds per planning round's solve", SOLVE_BUCKETS)

    def counter(self, name: str, help: str) -> None:
        self._metrics[name] = _Metric(name, help, "counter")

    def gauge(self, name: str, help: str) -> None:
        self._metrics[name] = _Metric(name, help, "gauge")

    def inc(self, name: str, by: float = 1, labels: Mapping[str, str] | None = None) -> None:
        with self._lock:
            m = self._metrics[name]
            key = _labels(labels)
            m.values[key] = m.values.get(key, 0) + by

    def set(self, name: str, value: float, labels: Mapping[str, str] | None = None) -> None:
        with self._lock:
            self._metrics[name].values[_labels(labels)] = value

    def observe(self, name: str, value: float) -> None:
        with self._lock:
            self._metrics[name].observe(value)

    def value(self, name: str, labels: Mapping[str, str] | None = None) -> float:
        with self._lock:
            m = self._metrics[name]
            if isinstance(m, _Histogram):
                return m.n
            return m.values.get(_labels(labels), 0)

    def render(self) -> str:
        with self._lock:
            lines: list[str] = []
            for m in self._metrics.values():
                lines += m.render()
        return "\n".join(lines) + "\n"


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
            from .errors import InputError
            raise InputError(f"--metrics-addr {address}: cannot listen: {e.strerror or e}") from None
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"{host}:{port}"

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
        from .errors import InputError
        raise InputError(f"--metrics-addr {text!r}: expected HOST:PORT")
    return f"{host or '0.0.0.0'}:{port}"

