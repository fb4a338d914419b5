"""The versions of placer and of the engines it runs on (for `placer version`, bug reports)."""

from __future__ import annotations

import importlib.metadata as metadata
import platform


def _dist(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "unknown"


def versions() -> dict[str, str]:
    """placer, OR-Tools (CP-SAT) and the jq binding (which bundles libjq), plus Python."""
    return {"placer": _dist("placer"), "ortools": _dist("ortools"), "jq": _dist("jq"),
            "python": platform.python_version()}


def version_line() -> str:
    v = versions()
    return f"placer {v['placer']} (OR-Tools {v['ortools']}, jq {v['jq']}, Python {v['python']})"
