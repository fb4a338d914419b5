"""`placer daemon`, in Kueue's shape: watch-fed caches (`caches`), a pure decision step
(`decide`), per-cluster execution (`execute`), rescheduling (`reschedule`), a fenced
Lease (`leadership`); `core.Daemon` wires them together. `from placer import daemon as D`
gives the public names."""

from placer.daemon.clock import Clock, FakeClock, TimeSource
from placer.daemon.config import JsonFormatter, config_from_file, parse_duration, run_daemon, setup_logging
from placer.daemon.core import Daemon
from placer.daemon.leadership import LeaderElector, LeaseTiming, NotLeader
from placer.daemon.reconcile import COMPANION_KINDS, COPY_DELETED, DRIFT_CORRECTED, EDIT_DOES_NOT_FIT, PHASE_INVALID
from placer.daemon.reschedule import DEFAULT_RESCHEDULE_AFTER
from placer.daemon.state import DaemonConfig, Pending, Remote
from placer.model.names import (
    ANN_GROUP,
    ANN_MESSAGE,
    ANN_PHASE,
    ANN_PIN,
    ANN_RESCHEDULE,
    ANN_SOURCE_GENERATION,
    FINALIZER,
    PLACED_CLUSTER,
)

__all__ = [
    "ANN_PIN", "ANN_GROUP", "ANN_MESSAGE", "ANN_PHASE", "ANN_RESCHEDULE", "ANN_SOURCE_GENERATION",
    "COMPANION_KINDS", "COPY_DELETED", "Clock", "DEFAULT_RESCHEDULE_AFTER", "DRIFT_CORRECTED", "Daemon",
    "DaemonConfig", "EDIT_DOES_NOT_FIT", "FINALIZER", "FakeClock", "JsonFormatter", "LeaderElector",
    "LeaseTiming", "NotLeader", "PHASE_INVALID", "PLACED_CLUSTER", "Pending", "Remote", "TimeSource",
    "config_from_file", "parse_duration", "run_daemon", "setup_logging",
]
