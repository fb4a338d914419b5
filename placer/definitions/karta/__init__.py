"""NVIDIA Workload Map (`run.ai/v1alpha1` `Karta`) definitions, read as placer definitions."""

from typing import TYPE_CHECKING, Any

from placer.definitions.karta.kind import FORMAT, is_karta

if TYPE_CHECKING:
    from placer.definitions.karta.load import Translation, karta_definition, karta_problems, parse_karta

# the schema, its rules and the translation load when first named (issue 24: every command
# loads the catalog, few catalogs hold a Karta, and the schema's models cost ~0.1 s to import)
_LAZY = frozenset({"Translation", "karta_definition", "karta_problems", "parse_karta"})


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from placer.definitions.karta import load
        return getattr(load, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["FORMAT", "Translation", "is_karta", "karta_definition", "karta_problems", "parse_karta"]
