"""Shared by the Karta tests: the project's own Karta fixtures, and the Workload Map corpus
read in place from ../shared (never copied into the project)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "karta"
EXAMPLES = ROOT / "examples"


def shared_karta() -> Path | None:
    """../shared/corpus/karta from the checkout (or a worktree one level further down)."""
    for base in (ROOT.parent, ROOT.parent.parent):
        found = base / "shared" / "corpus" / "karta"
        if (found / "definitions").is_dir():
            return found
    return None


def require_shared() -> Path:
    found = shared_karta()
    if found is None:
        pytest.skip("../shared/corpus/karta is absent: the Workload Map corpus is read in place")
    return found
