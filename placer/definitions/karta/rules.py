"""What the Workload Map validator checks beyond the CRD's schema, and every jq expression
compiled. A problem is (field, message); the field is the path in the user's document."""

from __future__ import annotations

from typing import Iterator

import jq

from placer.definitions.expressions import user_error
from placer.definitions.karta.schema import API_VERSION, KIND, STATUS_ORDER, Component, Karta

Problem = tuple[str, str]


def at(index: int) -> str:
    """Where component `index` (0: the root, then the children) sits in the document."""
    return "spec.structureDefinition." + ("rootComponent" if index == 0 else f"childComponents[{index - 1}]")


def problems(karta: Karta) -> list[Problem]:
    """Every rule the definition breaks, in document order; the jq check last."""
    found = [*_identity(karta), *_components(karta), *_owners(karta), *_gang_refs(karta)]
    return found or list(_jq(karta))


def _identity(karta: Karta) -> Iterator[Problem]:
    if karta.apiVersion != API_VERSION:
        yield "apiVersion", f"{karta.apiVersion!r}: a {KIND} is {API_VERSION}"
    if karta.kind != KIND:
        yield "kind", f"{karta.kind!r}: expected {KIND}"
    root = karta.root
    if root.kind is None or not (root.kind.version and root.kind.kind):
        yield f"{at(0)}.kind", "the root component needs a full group/version/kind"
    if root.statusDefinition is None:
        yield f"{at(0)}.statusDefinition", "the root component needs a status definition"
    if root.ownerRef:
        yield f"{at(0)}.ownerRef", "the root component has no owner"


def _components(karta: Karta) -> Iterator[Problem]:
    seen: set[str] = set()
    for i, comp in enumerate(karta.components):
        if comp.name in seen:
            yield f"{at(i)}.name", f"{comp.name!r}: component names must be unique"
        seen.add(comp.name)
        if comp.kind is not None and comp.kind.group == "" and comp.kind.kind != "Pod":
            yield f"{at(i)}.kind.group", f"only the core Pod has the empty group, not {comp.kind.kind}"
        yield from _spec_forms(i, comp)
        selector = comp.podSelector
        if selector and selector.componentInstanceSelector and not comp.instanceIdPath:
            yield f"{at(i)}.podSelector.componentInstanceSelector", "pairs with instanceIdPath, which is not set"


def _spec_forms(i: int, comp: Component) -> Iterator[Problem]:
    spec = comp.specDefinition
    if spec is None:
        return
    forms = [name for name, given in (("podTemplateSpecPath", spec.podTemplateSpecPath),
                                      ("podSpecPath", spec.podSpecPath),
                                      ("fragmentedPodSpecDefinition", spec.fragmentedPodSpecDefinition)) if given]
    if len(forms) > 1:
        yield f"{at(i)}.specDefinition", f"give one pod-spec form, not {' and '.join(forms)}"
    if spec.metadataPath and not spec.podSpecPath:
        yield f"{at(i)}.specDefinition.metadataPath", "goes with podSpecPath"
    frag = spec.fragmentedPodSpecDefinition
    if frag and frag.containerPath and frag.containersPath:
        yield f"{at(i)}.specDefinition.fragmentedPodSpecDefinition", "give containersPath or containerPath, not both"


def _owners(karta: Karta) -> Iterator[Problem]:
    names = {c.name: c for c in karta.components}
    root = karta.root.name
    for i, comp in enumerate(karta.components[1:], start=1):
        if not comp.ownerRef:
            yield f"{at(i)}.ownerRef", "a child component names its owner"
            continue
        if comp.ownerRef not in names:
            yield f"{at(i)}.ownerRef", f"{comp.ownerRef!r} is no component of this definition"
            continue
        chain, current = [comp.name], comp
        while current.name != root:
            parent = names.get(current.ownerRef or "")
            if parent is None:
                break                         # reported on its own component
            if parent.name in chain:
                yield f"{at(i)}.ownerRef", f"owner chain {' -> '.join([*chain, parent.name])} is a cycle"
                break
            chain.append(parent.name)
            current = parent


def _gang_refs(karta: Karta) -> Iterator[Problem]:
    names = {c.name for c in karta.components}
    gang = karta.spec.optimizationInstructions.gangScheduling
    if gang is None:
        return
    where = "spec.optimizationInstructions.gangScheduling"
    if gang.podGroup and gang.podGroups:
        yield where, "give podGroup or podGroups, not both"
    for j, sub in enumerate(gang.podGroup.subGroups if gang.podGroup else ()):
        if sub.componentName not in names:
            yield f"{where}.podGroup.subGroups[{j}].componentName", f"{sub.componentName!r} is no component"
    for g, entry in enumerate(gang.podGroups or ()):
        for m, member in enumerate(entry.members):
            if member.componentName not in names:
                yield (f"{where}.podGroups[{g}].members[{m}].componentName",
                       f"{member.componentName!r} is no component")


def expressions(karta: Karta) -> list[tuple[str, str]]:
    """(field, jq expression) for every expression of the definition."""
    out: list[tuple[str, str]] = []
    for i, comp in enumerate(karta.components):
        out += _component_expressions(at(i), comp)
    gang = karta.spec.optimizationInstructions.gangScheduling
    for g, entry in enumerate((gang.podGroups if gang else None) or ()):
        for m, member in enumerate(entry.members):
            base = f"spec.optimizationInstructions.gangScheduling.podGroups[{g}].members[{m}]"
            out += [(f"{base}.groupByKeyPaths[{k}]", e) for k, e in enumerate(member.groupByKeyPaths)]
            out += [(f"{base}.filters[{k}]", e) for k, e in enumerate(member.filters)]
    return out


def _component_expressions(base: str, comp: Component) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    if comp.instanceIdPath:
        out.append((f"{base}.instanceIdPath", comp.instanceIdPath))
    for part, model in (("specDefinition", comp.specDefinition), ("scaleDefinition", comp.scaleDefinition),
                        ("specDefinition.fragmentedPodSpecDefinition",
                         comp.specDefinition.fragmentedPodSpecDefinition if comp.specDefinition else None)):
        for name, value in (model.model_dump() if model else {}).items():
            if isinstance(value, str):
                out.append((f"{base}.{part}.{name}", value))
    selector = comp.podSelector
    for name, sub in (("componentTypeSelector", selector.componentTypeSelector if selector else None),
                      ("componentInstanceSelector", selector.componentInstanceSelector if selector else None),
                      ("replicaSelector", selector.replicaSelector if selector else None)):
        for field in ("keyPath", "idPath"):
            value = getattr(sub, field, None)
            if value:
                out.append((f"{base}.podSelector.{name}.{field}", value))
    out += _status_expressions(base, comp)
    for kind in ("suspendActions", "resumeActions"):
        for k, action in enumerate(getattr(comp.suspendDefinition, kind, None) or ()):
            out.append((f"{base}.suspendDefinition.{kind}[{k}].path", action.path))
    return out


def _status_expressions(base: str, comp: Component) -> list[tuple[str, str]]:
    status = comp.statusDefinition
    if status is None:
        return []
    out = []
    if status.conditionsDefinition:
        out.append((f"{base}.statusDefinition.conditionsDefinition.path", status.conditionsDefinition.path))
    if status.phaseDefinition:
        out.append((f"{base}.statusDefinition.phaseDefinition.path", status.phaseDefinition.path))
    for name in STATUS_ORDER:
        for k, matcher in enumerate(getattr(status.statusMappings, name)):
            if matcher.byExpression:
                out.append((f"{base}.statusDefinition.statusMappings.{name}[{k}].byExpression.expression",
                            matcher.byExpression.expression))
    return out


def _jq(karta: Karta) -> Iterator[Problem]:
    """One compile for the whole definition (each expression a function of its own, so it
    must parse alone); only on failure one compile per expression, to name the culprit."""
    exprs = expressions(karta)
    program = "".join(f"def _k{n}: {e}\n;\n" for n, (_, e) in enumerate(exprs))
    try:
        jq.compile(program + "(" + (", ".join(f"_k{n}" for n in range(len(exprs))) or "empty") + ") | empty")
        return
    except ValueError:
        pass
    for field, expr in exprs:
        try:
            jq.compile(f"def _k: {expr}\n;\n_k")
        except ValueError as e:
            yield field, f"jq does not compile {expr.strip()!r}: {user_error(expr, ()) or _first_line(str(e))}"


def _first_line(text: str) -> str:
    return " ".join(text.split("\n")[0].split()).removeprefix("jq: error: ")
