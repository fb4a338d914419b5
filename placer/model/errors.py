"""placer's own error family.

Every failure a user can cause or meet is one of these, carrying what it is about
(file, field, cluster, object), so that the CLI can print one line and pick an exit
code, and no client-library exception leaks out of the module that caused it.
"""

from __future__ import annotations

from typing import Sequence


class PlacerError(Exception):
    """Base of every error placer raises on purpose."""

    exit_code = 1

    def __init__(self, message: str, *, cluster: str | None = None, obj: str | None = None,
                 source: str | None = None):
        super().__init__(message)
        self.message = message
        self.cluster = cluster
        self.obj = obj
        self.source = source

    def __str__(self) -> str:
        where = [p for p in (self.source, self.cluster, self.obj) if p]
        return f"{': '.join(where)}: {self.message}" if where else self.message


# --- bad input: exit 2 -------------------------------------------------------------

class InputError(PlacerError):
    """Something the user fed placer is wrong: a file, a field, an option."""

    exit_code = 2


class DefinitionError(InputError):
    """A workload definition is invalid (schema or an expression that does not compile)."""


class EvaluationError(InputError):
    """A definition's expression failed on a given object."""

    def __init__(self, message: str, *, definition: str, field: str, expression: str,
                 obj: str | None = None, source: str | None = None):
        super().__init__(
            f"definition {definition}: {field}: expression {expression!r} failed: {message}",
            obj=obj, source=source)
        self.definition = definition
        self.field = field
        self.expression = expression


class PodSecurityRefused(InputError):
    """A workload's pod specs break the Pod Security level of the cluster it would go to."""


class UnknownKind(InputError):
    """A document whose apiVersion/kind has no definition and is no companion kind."""


# --- cluster I/O -------------------------------------------------------------------

class KubeError(PlacerError):
    """A Kubernetes API call failed. `status` is the HTTP status when there was one."""

    status: int | None = None
    retry_after: float | None = None         # seconds the server asked to wait (Retry-After)
    rolled_back: int = 0                     # a group apply that failed: objects it removed again
    leftovers: Sequence[str] = ()            # ... and those it could not remove

    def __init__(self, message: str, *, cluster: str | None = None, obj: str | None = None,
                 status: int | None = None, reason: str | None = None):
        super().__init__(message, cluster=cluster, obj=obj)
        if status is not None:
            self.status = status
        self.reason = reason


class NotFound(KubeError):
    status = 404


class Conflict(KubeError):
    status = 409


class Gone(KubeError):
    """A watch or list resourceVersion is too old (410): relist."""

    status = 410


class Invalid(KubeError):
    status = 422


class Forbidden(KubeError):
    status = 403


class Unreachable(KubeError):
    """Connection refused, timed out, DNS, TLS: the cluster could not be talked to."""


class ServerError(KubeError):
    """5xx or 429 still failing after retries."""


# --- planning ----------------------------------------------------------------------

class VerificationError(PlacerError):
    """The independent verifier rejected a plan: a solver bug, never a user error."""

    exit_code = 1
