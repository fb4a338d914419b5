"""NVIDIA Workload Map (`run.ai/v1alpha1` `Karta`) definitions, read as placer definitions."""

from placer.definitions.karta.load import FORMAT, Translation, is_karta, karta_definition, karta_problems, parse_karta

__all__ = ["FORMAT", "Translation", "is_karta", "karta_definition", "karta_problems", "parse_karta"]
