"""What names a Karta document, apart from its schema: the catalog asks every definition
document whether it is one, and most catalogs hold none, so the schema's models (about
0.1 s to import) load with the first Karta read, not with every command (issue 24)."""

from __future__ import annotations

from typing import Any

API_GROUP = "run.ai"
API_VERSION = "run.ai/v1alpha1"
KIND = "Karta"
FORMAT = "karta"


def is_karta(doc: Any) -> bool:
    return (isinstance(doc, dict) and doc.get("kind") == KIND
            and str(doc.get("apiVersion") or "").partition("/")[0] == API_GROUP)
