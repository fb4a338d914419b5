"""Counts as people write them: `1 GPU`, `2 GPUs`, `1 pod`, `0 pods`."""

from __future__ import annotations


def plural(count: int, word: str, many: str | None = None) -> str:
    """`count word`, the word in the plural (`many`, else word + "s") unless count is 1."""
    return f"{count} {word if count == 1 else (many or word + 's')}"


def noun(count: int, word: str, many: str | None = None) -> str:
    """The word alone, agreeing with `count` (for `3/1 GPU`-style fractions: by the total)."""
    return word if count == 1 else (many or word + "s")
