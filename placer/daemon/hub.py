"""The hub as a place where staged work must never run, and what the daemon tells its
operator about it, once each.

placer's model (docs/deploy.md, "The hub"): the recommended hub is an API server without
workload controllers (Karmada's shape), so nothing staged there makes a pod. On a hub whose
kube-controller-manager runs its workload controllers, a staged Deployment or StatefulSet
makes pods on the hub (neither kind can be suspended); Jobs and JobSets stay inert only when
staged suspended or with `spec.managedBy: placer.dev/daemon` (Kueue MultiKueue's way).

- `controller_of(obj)`: the controller that owns an object (an ownerReference with
  `controller: true`). Such an object is made by a controller, from a workload placer
  places itself: it is never placed (a ReplicaSet's pod placed beside its Deployment would
  bind its GPUs twice).
- `controllers_on_hub(client)`: whether a kube-controller-manager holds its Lease on the
  hub (`kube-system/kube-controller-manager`), said in one line at start.
- `Notices`: a warning said once per subject, not every retry.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Mapping

from placer.kube import KubeClient
from placer.model.errors import NotFound, PlacerError

log = logging.getLogger("placer.daemon")

CONTROLLER_MANAGER_LEASE = ("kube-system", "kube-controller-manager")
HUB_DOC = "docs/deploy.md#the-hub"


def controller_of(obj: Mapping[str, Any]) -> str | None:
    """`Kind/name` of the controller owning `obj`, or None."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return f"{ref.get('kind')}/{ref.get('name')}"
    return None


def controllers_on_hub(client: KubeClient) -> tuple[bool | None, str]:
    """(True, line) when a kube-controller-manager holds its Lease on the hub, (False, line)
    when there is none, (None, line) when the daemon cannot tell."""
    ns, name = CONTROLLER_MANAGER_LEASE
    try:
        lease = client.get(client.resource_for("coordination.k8s.io/v1", "Lease"), name, ns)
    except NotFound:
        return False, (f"hub: no kube-controller-manager Lease ({ns}/{name}): no workload controllers "
                       f"make pods of staged work there")
    except PlacerError as e:
        return None, (f"hub: cannot tell whether it runs workload controllers (Lease {ns}/{name}: {e.message}); "
                      f"staged work must not run on the hub: see {HUB_DOC}")
    holder = (lease.get("spec") or {}).get("holderIdentity") or "(none)"
    return True, (f"hub runs kube-controller-manager (Lease {ns}/{name}, holder {holder}): unless it runs "
                  f"without workload controllers, staged Deployments and StatefulSets make pods on the hub; "
                  f"stage Jobs and JobSets suspended or with spec.managedBy: placer.dev/daemon, or run the hub "
                  f"without workload controllers (`hack/kube-env up --hub NAME`; {HUB_DOC})")


class Notices:
    """Says each subject's warning once (and again only when its text changes); `clear`
    forgets a subject whose condition went away, with an info line."""

    def __init__(self) -> None:
        self._said: dict[str, str] = {}
        self._lock = threading.Lock()

    def warn(self, subject: str, text: str) -> bool:
        with self._lock:
            if self._said.get(subject) == text:
                return False
            self._said[subject] = text
        log.warning("%s", text)
        return True

    def clear(self, subject: str, text: str | None = None) -> None:
        with self._lock:
            had = self._said.pop(subject, None)
        if had is not None and text:
            log.info("%s", text)

    def said(self, subject: str) -> bool:
        return subject in self._said


def controlled_note(ref: str, owner: str) -> str:
    return (f"{ref} is made by {owner} (its controller): not placed. The hub runs workload controllers, so "
            f"staged work runs on the hub too; run the hub without them ({HUB_DOC})")
