"""HTTP front of the test API server: one ApiServer per cluster on its own 127.0.0.1 port, an ApiFleet
of several with a generated kubeconfig, and per-cluster fault injection and request counting."""
from __future__ import annotations

import random
import socket
import struct
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

from . import discovery
from .jsonfast import dumps, loads
from .store import ApiError, Store
from .wire import FastRequests

_PATCH_TYPES = {"application/json-patch+json": "json", "application/merge-patch+json": "merge",
                "application/strategic-merge-patch+json": "strategic", "application/apply-patch+yaml": "apply"}
_HEALTH = ("/healthz", "/livez", "/readyz")


@dataclass
class Request:
    method: str
    path: str
    query: dict
    verb: str                   # get list watch create update patch delete deletecollection | discovery
    resource: str = ""          # plural ("pods"), "pods/status" for subresources
    namespace: str = ""
    name: str = ""              # for a create: the created object's name, once answered
    code: int = 0
    at: float = field(default_factory=time.monotonic)   # when it arrived (time.monotonic)
    token: str = ""             # the bearer token presented, "" for none: tells clients apart
    dry: bool = False
    body: object = None         # the parsed body of a write (what the client sent)
    answered: float = 0.0       # when its answer was sent (time.monotonic; a write is committed by then)


class RequestLog:
    """Every request a cluster received, for tests and benchmarks to count calls."""

    def __init__(self):
        self._lock = threading.Lock()
        self.entries: list[Request] = []

    def add(self, req: Request) -> None:
        with self._lock:
            self.entries.append(req)

    def count(self, verb: str | None = None, resource: str | None = None, path: str | None = None,
              method: str | None = None, since: float | None = None, token: str | None = None) -> int:
        """Requests matching all given filters (path: substring of the URL path; since: arrived at or
        after this time.monotonic(); token: presented this bearer token)."""
        return len(self.select(verb, resource, path, method, since, token))

    def select(self, verb: str | None = None, resource: str | None = None, path: str | None = None,
               method: str | None = None, since: float | None = None, token: str | None = None) -> list[Request]:
        """The requests matching all given filters (as count)."""
        with self._lock:
            return [r for r in self.entries
                    if (verb is None or r.verb == verb) and (resource is None or r.resource == resource)
                    and (path is None or path in r.path) and (method is None or r.method == method)
                    and (since is None or r.at >= since) and (token is None or r.token == token)]

    def created(self, resource: str) -> list[Request]:
        """Objects of `resource` (plural) really created (201, not dry-run) by a create or an apply:
        every object ever made, even one deleted since; `name` says which."""
        return [r for r in self.select(resource=resource) if r.code == 201 and not r.dry
                and r.verb in ("create", "patch")]

    def by_verb_resource(self, since: float | None = None) -> dict[tuple[str, str], int]:
        """(verb, resource) -> requests, for reports (e.g. LIST requests per resource)."""
        out: dict[tuple[str, str], int] = {}
        for r in self.select(since=since):
            out[(r.verb, r.resource)] = out.get((r.verb, r.resource), 0) + 1
        return out

    def by_verb(self) -> dict[str, int]:
        with self._lock:
            out: dict[str, int] = {}
            for r in self.entries:
                out[r.verb] = out.get(r.verb, 0) + 1
            return out

    def clear(self) -> None:
        with self._lock:
            self.entries.clear()

    def __len__(self) -> int:
        return len(self.entries)


class Faults:
    """Faults injected into one cluster, switchable at runtime from a test."""

    def __init__(self, seed: int = 0):
        self._lock = threading.Lock()
        self._rng = random.Random(seed)
        self._gate: threading.Event | None = None
        self.held = 0                   # requests held by hang() since it was called
        self.clear()

    def clear(self) -> None:
        self.release()
        self.delay = 0.0                # seconds added before every response
        self.reset = False              # reset every connection (RST) instead of answering
        self._code = 0
        self._left: int | None = None
        self._fraction: float | None = None
        self._retry_after: int | None = None
        self._match: str | None = None

    def fail(self, code: int = 500, count: int | None = None, fraction: float | None = None,
             retry_after: int | None = None, match: str | None = None) -> None:
        """Answer `code` (with a Status body) for the next `count` requests, or for a `fraction` of them,
        or for all when neither is given; only requests whose path contains `match` when set.
        429 and 503 carry Retry-After when retry_after is given."""
        with self._lock:
            self._code, self._left, self._fraction = code, count, fraction
            self._retry_after, self._match = retry_after, match

    def hang(self, match: str | None = None, methods: tuple[str, ...] | None = None,
             spread: bool = False) -> None:
        """Accept requests and answer none until `release()` (a black-holed or overloaded API
        server): each request is recorded, then held before it is processed; released, it is
        processed (a held write commits then, though its client gave up long ago) and answered.
        `match`: only requests whose path contains it; `methods`: only these HTTP methods
        (e.g. ("PATCH",): applies stall, reads and deletes are served); `spread`: the first
        request held makes every later one held too (the server goes dark mid-create)."""
        with self._lock:
            if self._gate is None:
                self._gate = threading.Event()
            self._hang_match, self._hang_methods, self._hang_spread = match, methods, spread
            self.held = 0

    def release(self) -> None:
        """Let every held request (and every later one) through."""
        with self._lock:
            gate, self._gate = self._gate, None
        if gate is not None:
            gate.set()

    @property
    def hanging(self) -> bool:
        return self._gate is not None

    def _gate_for(self, path: str, method: str) -> threading.Event | None:
        with self._lock:
            gate = self._gate
            if gate is None or (self._hang_match and self._hang_match not in path) or \
                    (self._hang_methods and method not in self._hang_methods):
                return None
            self.held += 1
            if self._hang_spread:
                self._hang_match = self._hang_methods = None
            return gate

    def _error_for(self, path: str) -> ApiError | None:
        with self._lock:
            if not self._code or (self._match and self._match not in path):
                return None
            if self._left is not None:
                if self._left <= 0:
                    return None
                self._left -= 1
            if self._fraction is not None and self._rng.random() >= self._fraction:
                return None
            code, retry = self._code, self._retry_after
        headers = {"Retry-After": str(retry)} if retry is not None else {}
        details = {"retryAfterSeconds": retry} if retry is not None else None
        messages = {429: "Too many requests, please try again later.",
                    500: "Internal error occurred: injected fault", 503: "the server is currently unable to "
                    "handle the request", 403: 'forbidden: User "system:anonymous" cannot access this resource'}
        return ApiError(code, messages.get(code, f"injected fault {code}"), details=details, headers=headers)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
    cluster: "ApiServer"

    def handle_error(self, request, client_address) -> None:
        # a client that hangs up (a test ending, a request deadline, a stopped daemon) is not the
        # server's error: socketserver would print its traceback into the test run's output
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)


class _Handler(FastRequests):
    server: _HTTPServer

    def log_message(self, *args) -> None:    # quiet
        pass

    def setup(self) -> None:
        super().setup()
        # headers and body go out in two writes: without NODELAY, Nagle + the client's delayed
        # ACK add ~40 ms to every keep-alive request (Go's net/http, like a real API server, sets it)
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.cluster._track(self.connection, True)

    def finish(self) -> None:
        try:
            super().finish()
        except OSError:
            pass
        self.server.cluster._track(self.connection, False)

    def do_GET(self):
        self._handle()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    # ----- plumbing ----------------------------------------------------------------------------

    def _reset(self) -> None:
        """Abort the connection with a TCP RST, as a crashed or firewalled server would."""
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        try:
            self.connection.close()
        except OSError:
            pass

    def _send(self, code: int, obj, headers: dict | None = None) -> None:
        data = obj if isinstance(obj, bytes) else dumps(obj)
        self._req.code = code
        self._req.answered = time.monotonic()
        self.send_whole(code, data, {"Content-Type": "application/json", "Content-Length": str(len(data)),
                                     **(headers or {})})

    def _body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        if not raw:
            return None
        if "protobuf" in (self.headers.get("Content-Type") or ""):
            raise ApiError(415, "the body of the request was in an unknown format - accepted media types "
                                "include: application/json, application/yaml", "UnsupportedMediaType")
        try:
            return loads(raw)
        except ValueError:
            if self.headers.get("Content-Type", "").startswith("application/apply-patch+yaml"):
                try:
                    return yaml.safe_load(raw)
                except yaml.YAMLError:
                    pass
            raise ApiError(400, "the body of the request was in an unknown format") from None

    def _handle(self) -> None:
        cluster = self.server.cluster
        url = urlsplit(self.path)
        path = unquote(url.path).rstrip("/") or "/"
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        self._req = req = Request(self.command, path, query, "discovery")
        auth = self.headers.get("Authorization") or ""
        req.token = auth[len("Bearer "):] if auth.startswith("Bearer ") else ""
        try:
            body = req.body = self._body()
            route = self._route(cluster, path, query, req)
            cluster.requests.add(req)
            if cluster.faults.reset:
                return self._reset()
            if cluster.faults.delay and cluster._stopping.wait(cluster.faults.delay):
                return self._reset()
            if (gate := cluster.faults._gate_for(path, self.command)) is not None:
                while not gate.wait(0.05):
                    if cluster._stopping.is_set():
                        return self._reset()
            if err := cluster.faults._error_for(path):
                raise err
            if cluster.token and self.headers.get("Authorization") != f"Bearer {cluster.token}":
                raise ApiError(401, "Unauthorized")
            if route is None:
                raise ApiError(404, "the server could not find the requested resource")
            route(body)
        except ApiError as e:
            self._send(e.code, e.status(), e.headers)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as e:      # a harness bug: surface it as the API server would
            self._send(500, ApiError(500, f"Internal error occurred: {type(e).__name__}: {e}").status())
            raise

    # ----- routing -----------------------------------------------------------------------------

    def _route(self, cluster: "ApiServer", path: str, query: dict, req: Request):
        store = cluster.store
        if path in _HEALTH:
            return lambda _: self._send(200, b"ok")
        if path == "/version":
            return lambda _: self._send(200, discovery.VERSION_INFO)
        if path == "/api":
            return lambda _: self._send(200, discovery.api_versions(f"127.0.0.1:{cluster.port}"))
        if path == "/apis":
            return lambda _: self._send(200, discovery.api_group_list(store.served_types()))
        if path == "/openapi/v3":
            return lambda _: self._send(200, discovery.openapi_v3_root(store.served_types()))
        if path.startswith("/openapi/v3/"):
            gv = path[len("/openapi/v3/"):].removeprefix("api/").removeprefix("apis/")
            doc = discovery.openapi_v3_group_version(gv, store.served_types())
            return doc and (lambda _: self._send(200, doc))
        parts = path.strip("/").split("/")
        if parts[0] == "api" and len(parts) >= 2:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis" and len(parts) >= 3:
            group, version, rest = parts[1], parts[2], parts[3:]
        elif parts[0] == "apis" and len(parts) == 2:
            versions = discovery.group_versions(store.served_types()).get(parts[1])
            if not versions:
                return None
            return lambda _: self._send(200, {"kind": "APIGroup", "apiVersion": "v1",
                                              **discovery.api_group(parts[1], versions)})
        else:
            return None
        if not rest:
            gv = f"{group}/{version}" if group else version
            types = [t for t in store.served_types() if t.group == group and t.version == version]
            return (lambda _: self._send(200, discovery.api_resource_list(gv, types))) if types else None
        # (a resource of a group/version not served is not resolved below either: 404 as well)
        watch = query.get("watch", "").lower() in ("1", "true")
        if rest[0] == "watch":
            watch, rest = True, rest[1:]
        ns = None
        if len(rest) >= 3 and rest[0] == "namespaces" and not (len(rest) == 3 and rest[2] in ("status", "finalize")):
            ns, rest = rest[1], rest[2:]
        if not rest or len(rest) > 3:
            return None
        rt = store.resolve(group, version, rest[0])
        if rt is None or (ns is not None and not rt.namespaced):
            return None
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else None
        if sub and not (sub == "status" and rt.status):
            return None
        if name and rt.namespaced and ns is None:
            return None
        req.resource = rt.plural + (f"/{sub}" if sub else "")
        req.namespace, req.name = ns or "", name
        method = self.command
        if method == "GET":
            req.verb = "watch" if watch else ("get" if name else "list")
        else:
            req.verb = {("POST", False): "create", ("PUT", True): "update", ("PATCH", True): "patch",
                        ("DELETE", True): "delete", ("DELETE", False): "deletecollection"}.get(
                (method, bool(name)), "")
        if not req.verb:
            return _raiser(ApiError(405, "the server does not allow this method on the requested resource"))
        return lambda body: self._serve_resource(cluster, rt, ns, name, sub, query, body, req.verb)

    def _manager(self, query: dict) -> str:
        return query.get("fieldManager") or (self.headers.get("User-Agent") or "unknown").split("/")[0]

    def _serve_resource(self, cluster, rt, ns, name, sub, query, body, verb) -> None:
        store = cluster.store
        dry = query.get("dryRun") == "All"
        self._req.dry = dry
        labels, fields = query.get("labelSelector"), query.get("fieldSelector")
        if verb == "get":
            return self._send(200, store.get(rt, ns, name))
        if verb == "list":
            try:
                limit = int(query.get("limit") or 0)
            except ValueError:
                raise ApiError(400, f"invalid limit: {query['limit']!r}") from None
            listing = store.list(rt, ns, labels, fields, limit, query.get("continue"))
            return self._send(200, store.encode_list(rt, listing))
        if verb == "watch":
            if name:
                fields = ",".join(f for f in (fields, f"metadata.name={name}") if f)
            return self._stream(cluster, rt, ns, labels, fields, query)
        if verb == "create":
            made = store.create(rt, ns, _object(body), self._manager(query), dry)
            self._req.name = (made.get("metadata") or {}).get("name") or ""
            return self._send(201, made)
        if verb == "update":
            return self._send(200, store.update(rt, ns, name, _object(body), sub, self._manager(query), dry))
        if verb == "patch":
            ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            kind = _PATCH_TYPES.get(ctype)
            if kind is None:
                raise ApiError(415, f"the body of the request was in an unknown format - accepted media types "
                                    f"include: {', '.join(_PATCH_TYPES)}", "UnsupportedMediaType")
            if body is None:
                raise ApiError(400, "the body of the request was in an unknown format")
            manager = query.get("fieldManager", "") if kind == "apply" else self._manager(query)
            obj, created = store.patch(rt, ns, name, kind, body, sub, manager,
                                       query.get("force", "").lower() in ("1", "true"), dry)
            return self._send(201 if created else 200, obj)
        if verb == "delete":
            return self._send(200, store.delete(rt, ns, name, body if isinstance(body, dict) else None, dry))
        if verb == "deletecollection":
            return self._send(200, store.delete_collection(rt, ns, labels, fields, dry))

    def _stream(self, cluster, rt, ns, labels, fields, query) -> None:
        try:
            timeout = float(query.get("timeoutSeconds") or cluster.watch_timeout)
        except ValueError:
            raise ApiError(400, "invalid timeoutSeconds") from None
        events = cluster.store.watch_json(rt, ns, query.get("resourceVersion"), labels, fields,
                                     query.get("allowWatchBookmarks", "").lower() in ("1", "true"),
                                     cluster.bookmark_interval, timeout,
                                     query.get("sendInitialEvents", "").lower() == "true")
        self._req.code = 200
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        cluster._track_watch(self.connection, True)
        try:
            self.wfile.flush()
            for lines in events:        # a batch of events, one chunk
                self.wfile.write(b"%x\r\n%s\r\n" % (len(lines), lines))
            self.wfile.write(b"0\r\n\r\n")
        finally:
            events.close()
            cluster._track_watch(self.connection, False)


def _raiser(err: ApiError):
    def route(_body):
        raise err
    return route


def _object(body) -> dict:
    if not isinstance(body, dict):
        raise ApiError(400, "the body of the request was in an unknown format")
    return body


class ApiServer:
    """One test cluster: a Store behind a threaded HTTP server on 127.0.0.1."""

    def __init__(self, name: str = "cluster", port: int = 0, token: str | None = None, history: int = 1000,
                 bookmark_interval: float = 5.0, watch_timeout: float = 1800.0):
        self.name, self.port, self.token = name, port, token
        self.bookmark_interval, self.watch_timeout = bookmark_interval, watch_timeout
        self.store = Store(history=history)
        self.faults = Faults()
        self.requests = RequestLog()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._conns: set[socket.socket] = set()
        self._watch_conns: set[socket.socket] = set()
        self._conn_lock = threading.Lock()
        self._stopping = threading.Event()

    # ----- lifecycle ---------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "ApiServer":
        self._stopping.clear()
        self._httpd = _HTTPServer(("127.0.0.1", self.port), _Handler)
        self._httpd.cluster = self
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name=f"kubeapi-{self.name}", daemon=True)
        self._thread.start()
        return self

    def down(self) -> None:
        """Refuse connections (listening socket closed, open connections cut) until up()."""
        if self._httpd is None:
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        self._httpd = None
        self.store.drop_watches()
        with self._conn_lock:
            conns = list(self._conns)
        for c in conns:
            _shutdown(c)

    def up(self) -> None:
        """Listen again on the same port after down()."""
        if self._httpd is None:
            self.start()

    def stop(self) -> None:
        self._stopping.set()
        self.store.close()
        self.down()

    # ----- test controls -----------------------------------------------------------------------

    def drop_watches(self, abrupt: bool = False) -> None:
        """End every open watch: cleanly (the stream ends) or abruptly (the connection is cut)."""
        if abrupt:
            with self._conn_lock:
                conns = list(self._watch_conns)
            for c in conns:
                _shutdown(c)
        self.store.drop_watches()

    def reset(self) -> None:
        """Clear faults and the request log (between tests on a shared fleet)."""
        self.faults.clear()
        self.requests.clear()
        self.up()

    def seed(self, objs, events: bool = False) -> int:
        """Insert objects directly (no HTTP); returns the store's resourceVersion. See Store.seed."""
        return self.store.seed(objs, events)

    def install_crds(self, crds=None) -> None:
        """Register CRDs (default: every catalog kind the tests use), recorded as ordinary creates."""
        from .builders import catalog_crds
        rt = self.store.type_for("apiextensions.k8s.io/v1", "CustomResourceDefinition")
        for crd in catalog_crds() if crds is None else crds:
            try:
                self.store.create(rt, None, crd, "kubeapi-harness")
            except ApiError as e:
                if e.code != 409:
                    raise

    def objects(self, api_version: str, kind: str, namespace: str | None = None) -> list[dict]:
        """What the store holds now, for assertions that should not go through HTTP."""
        return self.store.list(self.store.type_for(api_version, kind), namespace)["items"]

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> dict:
        return self.store.get(self.store.type_for(api_version, kind), namespace, name)

    def _track(self, conn: socket.socket, add: bool) -> None:
        with self._conn_lock:
            (self._conns.add if add else self._conns.discard)(conn)

    def _track_watch(self, conn: socket.socket, add: bool) -> None:
        with self._conn_lock:
            (self._watch_conns.add if add else self._watch_conns.discard)(conn)


def _shutdown(conn: socket.socket) -> None:
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass


@dataclass
class ApiFleet:
    """Several independent clusters and a kubeconfig with one context per cluster."""
    clusters: dict[str, ApiServer]
    kubeconfig: Path
    tokens: bool = False
    extra: dict = field(default_factory=dict)

    def __getitem__(self, name: str) -> ApiServer:
        return self.clusters[name]

    def __enter__(self) -> "ApiFleet":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def __iter__(self):
        return iter(self.clusters.values())

    def __len__(self) -> int:
        return len(self.clusters)

    @property
    def names(self) -> list[str]:
        return list(self.clusters)

    def reset(self) -> None:
        for c in self:
            c.reset()

    def stop(self) -> None:
        for c in self:
            c.stop()

    def write_kubeconfig(self, path: Path | None = None, names=None, current: str | None = None) -> Path:
        """A kubeconfig for some or all clusters (context name = cluster name)."""
        return write_kubeconfig([self.clusters[n] for n in (names or self.clusters)], path or self.kubeconfig,
                                current)


def write_kubeconfig(clusters, path: Path, current: str | None = None) -> Path:
    clusters = list(clusters)
    doc: dict = {
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": c.name, "cluster": {"server": c.url}} for c in clusters],
        "users": [{"name": c.name, "user": {"token": c.token} if c.token else {}} for c in clusters],
        "contexts": [{"name": c.name, "context": {"cluster": c.name, "user": c.name}} for c in clusters],
        "current-context": current or (clusters[0].name if clusters else ""),
    }
    path = Path(path)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def start_fleet(names=("alpha", "beta", "gamma"), directory: Path | str = ".", crds: bool = True,
                tokens: bool = False, **server_options) -> ApiFleet:
    """Start one ApiServer per name (ports chosen by the OS) and write `<directory>/kubeconfig`."""
    clusters: dict[str, ApiServer] = {}
    try:
        for name in names:
            token = f"token-{name}" if tokens else None
            clusters[name] = ApiServer(name, token=token, **server_options).start()
            if crds:
                clusters[name].install_crds()
    except Exception:
        for c in clusters.values():
            c.stop()
        raise
    path = write_kubeconfig(clusters.values(), Path(directory) / "kubeconfig")
    return ApiFleet(clusters, path, tokens)
