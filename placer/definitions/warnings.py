"""What a definition says about one object beside its Workload: today, the gang keys a
Karta cannot predict before the pods exist (the workload then is one gang). Pure; the
check is compiled on first use, once per definition, off the interpretation hot path."""

from __future__ import annotations

import threading
from typing import Any, Mapping

import jq

from placer.definitions.catalog import CompiledDefinition

_compiled: dict[str, Any] = {}
_lock = threading.Lock()


def _program(text: str) -> Any:
    with _lock:
        found = _compiled.get(text)
        if found is None:
            found = _compiled[text] = jq.compile(text)
        return found


def definition_warnings(compiled: CompiledDefinition, obj: Mapping[str, Any]) -> list[str]:
    """One line per thing the reader should know, naming the definition and the path."""
    if not compiled.gang_check:
        return []
    try:
        missing = _program(compiled.gang_check).input_value(obj).first()
    except (ValueError, StopIteration):
        return []                             # interpretation itself reports what fails
    return [f"definition {compiled.name} ({compiled.source}): gang key {path} cannot be predicted before the "
            f"pods exist; the workload is one gang" for path in missing or ()]
