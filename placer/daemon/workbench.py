"""What every acting part of the daemon works with: the book, the views of the hub and the
targets, the executor, the work queue and the clock. One value, built once by `Daemon`,
so a part declares only what is its own beside it."""

from __future__ import annotations

from dataclasses import dataclass

from placer.daemon.clock import TimeSource
from placer.daemon.executor import Executor
from placer.daemon.informer import WorkQueue
from placer.daemon.state import Book
from placer.daemon.targets import Targets
from placer.daemon.view import StagingView


@dataclass(frozen=True)
class Workbench:
    book: Book
    view: StagingView
    targets: Targets
    executor: Executor
    queue: WorkQueue
    clock: TimeSource
