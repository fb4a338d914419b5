"""Checks of the numbers and modes a command is given, shared by the use cases and the
CLI (pure: the CLI imports this at start)."""

from __future__ import annotations

import math

from placer.model.errors import InputError

# seconds, the wall-clock safety net of plan's whole plan and of submit's solver; None: the solver's
# default for the instance (placer.solve.budget: 10 s, plus 4 ms per group and 0.2 ms per node),
# so that the clock does not cut the work bounded by counts and effort on a large instance
DEFAULT_TIME_LIMIT: float | None = None
TIME_LIMIT_HELP = ("Wall-clock safety net on the solve, seconds, counted once the inputs are read (default: 10 "
                   "plus 4 per 1,000 placement groups and 2 per 10,000 nodes). The plan's work is bounded by counts "
                   "and --effort, so it does not depend on the machine; a step the clock cuts short is "
                   "flagged timeLimitHit.")
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
