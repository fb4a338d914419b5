"""Many clusters: a kubeconfig and one cached client per context."""

from __future__ import annotations

import random
import threading
import time
from functools import partial
from typing import TYPE_CHECKING, Callable, Iterable, TypeVar

from placer.kube.concurrency import run_concurrently
from placer.kube.config import KubeConfig, kubeconfig_paths
from placer.kube.transport import RetryPolicy, Stats
from placer.model.errors import InputError, PlacerError

if TYPE_CHECKING:
    from placer.kube.client import KubeClient

T = TypeVar("T")


class Kube:
    """A kubeconfig (one or several files) and one cached client per context."""

    def __init__(self, kubeconfig: str | None = None, *, timeout: float = 30.0,
                 connect_timeout: float = 5.0, retry: RetryPolicy = RetryPolicy(),
                 sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None,
                 max_workers: int = 16, config: KubeConfig | None = None):
        self.kubeconfig = kubeconfig_paths(kubeconfig)
        self._given = kubeconfig                # None: $KUBECONFIG or the default, as errors say
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.retry = retry
        self.sleep = sleep
        self.rng = rng or random.Random()
        self.max_workers = max_workers
        self.stats = Stats()
        self._clients: dict[str | None, KubeClient] = {}
        self._config: KubeConfig | None = config if config is not None and config.path == self.kubeconfig else None
        self._lock = threading.Lock()

    @property
    def config(self) -> KubeConfig:
        with self._lock:
            if self._config is None:
                self._config = KubeConfig(self._given)
            return self._config

    def contexts(self) -> tuple[list[str], str | None]:
        return self.config.contexts()

    def client(self, context: str | None = None, *, cluster: str | None = None) -> KubeClient:
        """The client for `context` (the current context when None)."""
        config = self.config
        with self._lock:
            cached = self._clients.get(context)
            if cached is None:
                cached = self._clients[context] = self._new_client(config, context, cluster)
            return cached

    def _new_client(self, config: KubeConfig, context: str | None, cluster: str | None) -> KubeClient:
        ctx = context or config.contexts()[1]
        if ctx is None:
            raise InputError("kubeconfig has no current context; pass --context", source=config.path)
        configuration, namespace = config.configure(ctx)
        # placer retries itself (with backoff and Retry-After); urllib3 must not retry too
        configuration.retries = False
        configuration.connection_pool_maxsize = max(4, self.max_workers)
        # the client library loads with the first client (issue 24: a plan on simulated clusters makes none)
        from kubernetes import client as k8s_client

        from placer.kube.client import KubeClient
        from placer.kube.sending import Transport
        api = k8s_client.ApiClient(configuration)
        transport = Transport(api, cluster=cluster or ctx, timeout=self.timeout,
                              connect_timeout=self.connect_timeout, retry=self.retry, sleep=self.sleep,
                              rng=self.rng, stats=self.stats)
        return KubeClient(transport, namespace=namespace)

    def each(self, fn: Callable[[KubeClient], T], contexts: Iterable[str | None]
             ) -> dict[str | None, T | PlacerError]:
        """fn(client) for every context, concurrently. A placer error for one context is
        returned in its slot, never raised: one bad cluster must not stop the others."""
        def call(ctx):
            try:
                return fn(self.client(ctx))
            except PlacerError as e:
                return e
        return run_concurrently({ctx: partial(call, ctx) for ctx in contexts},
                                max_workers=self.max_workers)

    def close(self) -> None:
        with self._lock:
            for c in self._clients.values():
                c.api.close()
            self._clients.clear()
