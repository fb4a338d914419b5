"""Checks of the numbers and modes a command is given, shared by the use cases and the
CLI (pure: the CLI imports this at start)."""

from __future__ import annotations

import math

from placer.model.errors import InputError

DEFAULT_TIME_LIMIT = 10.0          # seconds: plan's bound on the whole plan, submit's solver limit
DRY_RUN_MODES = ("none", "client", "server")


def check_number(option: str, value: float | int | None, *, minimum: float = 0, inclusive: bool = False) -> None:
    """A numeric option: finite and above `minimum` (or at it, when `inclusive`). NaN fails
    every comparison, so it is caught here rather than read as 'no limit'."""
    if value is None:
        return
    ok = math.isfinite(value) and (value >= minimum if inclusive else value > minimum)
    if not ok:
        bound = f"at least {minimum:g}" if inclusive else ("positive" if minimum == 0 else f"above {minimum:g}")
        raise InputError(f"{option} {value}: must be a finite number, {bound}")


def dry_run_mode(value: str | None) -> str | None:
    """kubectl's `--dry-run[=none|client|server]`: None for a real run."""
    if value is None or value == "none":
        return None
    if value not in DRY_RUN_MODES:
        raise InputError(f"--dry-run={value}: expected one of {', '.join(DRY_RUN_MODES)}")
    return value
