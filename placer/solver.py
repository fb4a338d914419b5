"""Compatibility: the solver lives in `placer.solve`; this name stays for callers on other branches."""

from .solve import ANN_CLUSTER, ANN_PRIORITY, ANN_SELECTOR, DEFAULT_EFFORT, DEFAULT_WORKERS, solve

__all__ = ["ANN_CLUSTER", "ANN_PRIORITY", "ANN_SELECTOR", "DEFAULT_EFFORT", "DEFAULT_WORKERS", "solve"]
