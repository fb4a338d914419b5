"""Calls on several clusters at once."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Mapping, TypeVar

T = TypeVar("T")


def run_concurrently(calls: Mapping[Any, Callable[[], T]], max_workers: int = 16) -> dict[Any, T]:
    """Run the calls on a thread pool; results by key (exceptions propagate)."""
    if len(calls) <= 1:
        return {k: fn() for k, fn in calls.items()}
    with ThreadPoolExecutor(max_workers=min(max_workers, len(calls))) as pool:
        futures = {k: pool.submit(fn) for k, fn in calls.items()}
        return {k: f.result() for k, f in futures.items()}

