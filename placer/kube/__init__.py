"""The one door to Kubernetes: every cluster call placer makes goes through here.

This package is the only part of placer that imports the `kubernetes` client. It uses the client's
ApiClient for configuration, auth and HTTP (so kubeconfig handling is exactly the
library's), but keeps objects as plain dicts parsed from the raw JSON body: the
library's model deserialization costs far more than the request itself on large lists.

- `Kube`: the kubeconfig (one or several files, as `KUBECONFIG` allows) and a cached
  `KubeClient` per context; `Kube.each()` runs a call on several clusters concurrently.
- `KubeClient`: one cluster. Discovery (cached) resolves kubectl-style resource names;
  list (paginated), get, create, server-side apply, merge patch, status patch, delete,
  and a resuming watch that relists on 410 Gone.
- Every call has a timeout, and is retried with exponential backoff and jitter on
  429/5xx/connection errors, honoring Retry-After. Failures become placer's own errors
  (`placer.model.errors`) naming the cluster and the object.

Rooms: `config` (kubeconfig and contexts), `transport` (retry policy, statistics, errors mapped
by type), `resources` (what discovery describes), `request` (requests as values, built by pure
functions, one per verb), `sending` (`Transport`: sends a request, retries, runs the hooks
policy is composed of), `discovery`, `client` (one cluster: the verbs), `watch`, `contexts`
(`Kube`: many clusters), `concurrency`.
"""

from typing import TYPE_CHECKING, Any

from placer.kube.concurrency import run_concurrently
from placer.kube.config import KubeConfig, kubeconfig_exists, kubeconfig_paths, list_contexts
from placer.kube.contexts import Kube
from placer.kube.discovery import Discovery
from placer.kube.request import Request
from placer.kube.resources import ObjectList, Resource, WatchEvent
from placer.kube.transport import APPLY_PATCH, FIELD_MANAGER, MERGE_PATCH, NO_RETRY, RetryPolicy, Stats, status_error

if TYPE_CHECKING:
    from placer.kube.client import DEFAULT_PAGE, KubeClient
    from placer.kube.sending import Transport

# the rooms that import the client library, loaded when first named (issue 24: `placer plan` of
# files on simulated clusters uses none of it, and it costs about 0.2 s to import)
_LAZY = {"DEFAULT_PAGE": "placer.kube.client", "KubeClient": "placer.kube.client", "Transport": "placer.kube.sending"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "APPLY_PATCH", "DEFAULT_PAGE", "Discovery", "FIELD_MANAGER", "MERGE_PATCH", "NO_RETRY", "Kube", "KubeClient",
    "KubeConfig", "ObjectList", "Request", "Resource", "RetryPolicy", "Stats", "Transport", "WatchEvent",
    "kubeconfig_exists", "kubeconfig_paths", "list_contexts", "run_concurrently", "status_error",
]
