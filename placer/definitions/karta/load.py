"""Reading a Karta document: the CRD's schema, the validator's rules, every jq compiled;
then its translation into a placer definition document."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from placer.definitions.karta.gangs import unpredicted_expression
from placer.definitions.karta.kind import FORMAT, is_karta  # noqa: F401 (re-exported)
from placer.definitions.karta.rules import problems
from placer.definitions.karta.schema import Karta
from placer.definitions.karta.translate import translate
from placer.definitions.karta.tree import Tree
from placer.model.errors import DefinitionError


def _name(doc: Any) -> str:
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    return str(meta.get("name")) if isinstance(meta, dict) and meta.get("name") else "?"


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else ("." if out else "") + str(part)
    return out or "<root>"


def parse_karta(doc: Any, source: str) -> Karta:
    """A valid Karta, or DefinitionError: `source: karta NAME: field: message` (the first
    problem; `karta_problems` lists them all)."""
    found = karta_problems(doc)
    if isinstance(found, Karta):
        return found
    field, message = found[0]
    raise DefinitionError(f"karta {_name(doc)}: {field}: {message}", source=source)


def karta_problems(doc: Any) -> Karta | list[tuple[str, str]]:
    """The parsed Karta when valid, else every problem as (field, message)."""
    try:
        karta = Karta.model_validate(doc)
    except ValidationError as e:
        return [(_loc(err["loc"]), re.sub(r"^Value error, ", "", err["msg"])) for err in e.errors()]
    return problems(karta) or karta


@dataclass(frozen=True)
class Translation:
    document: dict[str, Any]                  # a placer definition document
    # a jq program over the object: the gang key paths it cannot predict (for warnings)
    gang_check: str | None


def karta_definition(doc: Any, source: str) -> Translation:
    """The placer definition document a Karta document stands for, and its gang check."""
    karta = parse_karta(doc, source)
    document = translate(karta)
    unpredicted = unpredicted_expression(Tree(karta))
    lets = "".join(f"({expr}) as ${name} | " for name, expr in document["let"].items())
    return Translation(document, f". as $root | {lets}{unpredicted}" if unpredicted else None)
