"""The labels placer puts on what it creates, derived from a workload's identity.

Label values allow no '/' and at most 63 characters, so identities and cluster names are
turned into label-safe tokens here, in one place, for `submit`, the daemon and `get` alike.
"""

from __future__ import annotations

import hashlib
import re

from placer.model.names import MANAGED
from placer.model.workload import WorkloadRef

MANAGED_SELECTOR = f"{MANAGED}=true"


def _legacy_key(ref: WorkloadRef) -> str:
    """`<namespace>/<Kind>/<name>`: the key placer labelled copies with before the API
    group was part of the identity; still recognised when adopting such copies."""
    return f"{ref.namespace}/{ref.kind}/{ref.name}"


def label_value(text: str) -> str:
    """A label-safe stable token for any text (label values allow no '/', at most 63 chars)."""
    return hashlib.sha256(text.encode()).hexdigest()[:40]


def workload_label(ref: WorkloadRef | str) -> str:
    """The `placer.dev/workload` label value: a token of the ref's text (`str(ref)`, as
    the daemon's caches hold it); the same value for either."""
    return label_value(str(ref))


def legacy_workload_label(ref: WorkloadRef) -> str:
    """The label value copies made before the API group was part of the identity carry."""
    return label_value(_legacy_key(ref))


_LABEL_BAD = re.compile(r"[^A-Za-z0-9_.-]")


def cluster_label(name: str) -> str:
    """The cluster name as a label value, so that `kubectl get -l placer.dev/placed-cluster=east`
    works (a context name such as an EKS ARN is squeezed into the label alphabet; the
    annotation keeps it exactly)."""
    return _LABEL_BAD.sub("-", name)[:63].strip("-_.")
