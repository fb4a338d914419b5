"""`placer catalog lint`: a valid Karta evaluated over real manifests with the real jq, for
what validation cannot see. A finding names the definition's field and the sample.

- a stream of another length than the instance ids (`instanceIdPath`)
- a `//` inside a stream (`.items[].replicas // 1` drops nulls: values shift instances)
- a product with an unset field (`.replicas * .template.spec.parallelism`)
- sibling components of one level that disagree (children of a repeated level whose counts
  are no whole multiple of that level's scale)
- a gang larger than the pods it groups (the library's subtree scale against the pods)
- a path reading a field the sample does not have
- a fragmented pod-spec path that cannot be assigned through
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Sequence

import jq

from placer.definitions.karta.rules import at
from placer.definitions.karta.schema import Component, Karta

# stream paths of a component, by field (relative to the component's place in the document)
_SCALE = ("replicasPath", "minReplicasPath", "maxReplicasPath")
# paths whose field a manifest must have for the definition to read it (optional fields,
# such as labels or elastic bounds, are fine to miss)
_REQUIRED = ("instanceIdPath", "scaleDefinition.replicasPath", "specDefinition.podTemplateSpecPath",
             "specDefinition.podSpecPath", "specDefinition.fragmentedPodSpecDefinition.containersPath",
             "specDefinition.fragmentedPodSpecDefinition.containerPath")


@dataclass(frozen=True)
class Finding:
    field: str                                # where in the definition
    message: str
    sample: str                               # the manifest (file:line), or "" for a static finding


class Linter:
    """One definition; its jq compiled once, evaluated over any number of samples."""

    def __init__(self, karta: Karta):
        self.karta = karta
        self.by_name = {c.name: c for c in karta.components}
        self._compiled: dict[str, Any] = {}

    def run(self, expr: str, obj: Any) -> list[Any]:
        program = self._compiled.get(expr)
        if program is None:
            program = self._compiled[expr] = jq.compile(expr)
        return list(program.input_value(obj).all())

    def streams(self, comp: Component) -> dict[str, str]:
        """field (relative to the component) -> path, for every stream zipped with the ids."""
        out: dict[str, str] = {}
        scale = comp.scaleDefinition
        for name in _SCALE:
            value = getattr(scale, name, None) if scale else None
            if value:
                out[f"scaleDefinition.{name}"] = value
        spec = comp.specDefinition
        if spec is not None:
            for name, value in spec.model_dump().items():
                if isinstance(value, str):
                    out[f"specDefinition.{name}"] = value
            for name, value in (spec.fragmentedPodSpecDefinition.model_dump().items()
                                if spec.fragmentedPodSpecDefinition else ()):
                if value:
                    out[f"specDefinition.fragmentedPodSpecDefinition.{name}"] = value
        return out

    def static(self) -> list[Finding]:
        out = []
        for i, comp in enumerate(self.karta.components):
            if not comp.instanceIdPath:
                continue
            for field, path in self.streams(comp).items():
                if stream_fallback(path):
                    out.append(Finding(f"{at(i)}.{field}", f"`//` inside a stream ({short(path)}): a null entry is "
                                       "dropped and the values after it shift to the wrong instance; put the "
                                       "fallback in parentheses per entry", ""))
        return out

    def sample(self, obj: Any, where: str) -> list[Finding]:
        found = [*self._streams(obj, where), *self._siblings(obj, where), *self._gangs(obj, where)]
        return found

    def _streams(self, obj: Any, where: str) -> Iterator[Finding]:
        for i, comp in enumerate(self.karta.components):
            ids = self._values(comp.instanceIdPath, obj) if comp.instanceIdPath else [""]
            if isinstance(ids, str):
                yield Finding(f"{at(i)}.instanceIdPath", _failure(ids), where)
                continue
            for field, path in self.streams(comp).items():
                values = self._values(path, obj)
                if isinstance(values, str):
                    yield Finding(f"{at(i)}.{field}", _failure(values), where)
                    continue
                if len(values) != len(ids):
                    yield Finding(f"{at(i)}.{field}", f"yields {len(values)} values for {len(ids)} instance ids "
                                  f"({comp.instanceIdPath or 'one instance'})", where)
                if field in _REQUIRED and values and all(v is None for v in values):
                    yield Finding(f"{at(i)}.{field}", f"reads a field the sample does not have ({short(path)})",
                                  where)
                if field.startswith("specDefinition.fragmentedPodSpecDefinition."):
                    yield from self._assignable(f"{at(i)}.{field}", path, obj, where)
            if comp.instanceIdPath and ids and all(v is None for v in ids):
                yield Finding(f"{at(i)}.instanceIdPath",
                              f"reads a field the sample does not have ({short(comp.instanceIdPath)})", where)

    def _assignable(self, field: str, path: str, obj: Any, where: str) -> Iterator[Finding]:
        try:
            self.run(f"[path({path}\n)]", obj)
        except ValueError as e:
            reason = _first(str(e)).split(" near ")[0].split(" with result ")[0]
            yield Finding(field, f"cannot be assigned through ({short(path)}): {reason}; a consumer writes the "
                          "pod spec through this path", where)

    def _values(self, path: str | None, obj: Any) -> list[Any] | str:
        try:
            return self.run(path or "null", obj)
        except ValueError as e:
            return str(e)

    def count(self, comp: Component, obj: Any, prefer_min: bool = False) -> int | None:
        """The component's scale over the whole workload (its stream summed); with
        `prefer_min`, minReplicas where > 0, as the library's gang sizing does."""
        scale = comp.scaleDefinition
        total = 0
        replicas = self._numbers(scale.replicasPath if scale else None, obj, [1])
        if replicas is None:
            return None
        lows = self._numbers(scale.minReplicasPath if scale else None, obj) if prefer_min else None
        for k, value in enumerate(replicas):
            low = lows[k] if lows and k < len(lows) else None
            total += low if low is not None and low > 0 else value
        return total

    def _numbers(self, path: str | None, obj: Any, default: list[int] | None = None) -> list[int] | None:
        if not path:
            return default
        values = self._values(path, obj)
        if isinstance(values, str):
            return None
        out = []
        for v in values:
            try:
                out.append(int(v) if v is not None else 0)
            except (TypeError, ValueError):
                return None
        return out

    def children(self, comp: Component) -> list[Component]:
        return [c for c in self.karta.components if c.ownerRef == comp.name]

    def _siblings(self, obj: Any, where: str) -> Iterator[Finding]:
        for i, owner in enumerate(self.karta.components):
            selector = owner.podSelector
            if not (selector and selector.replicaSelector):
                continue
            units = self.count(owner, obj)
            counts = {c.name: self.count(c, obj) for c in self.children(owner)}
            if not units or any(v is None for v in counts.values()):
                continue
            off = {n: v for n, v in counts.items() if v is not None and v % units}
            if off:
                listed = ", ".join(f"{n} {v}" for n, v in counts.items())
                yield Finding(f"{at(i)}.scaleDefinition.replicasPath",
                              f"{owner.name} counts {units} units, but its children count {listed}: siblings of "
                              f"one level disagree on how many {owner.name} units there are", where)

    def subtree(self, comp: Component, obj: Any) -> int | None:
        """The library's CalculateSubtreeScale: the component's scale (minReplicas when > 0)
        times the sum of its children's subtree scales."""
        own = self.count(comp, obj, prefer_min=True)
        kids = [self.subtree(c, obj) for c in self.children(comp)]
        if own is None or any(k is None for k in kids):
            return None
        return own * sum(k for k in kids if k is not None) if kids else own

    def pods(self, comp: Component, obj: Any) -> int | None:
        """Pods of the pod components in `comp`'s subtree (their replicas summed)."""
        total = self.count(comp, obj) if comp.has_pods else 0
        for child in self.children(comp):
            more = self.pods(child, obj)
            if total is None or more is None:
                return None
            total += more
        return total

    def _gangs(self, obj: Any, where: str) -> Iterator[Finding]:
        gang = self.karta.spec.optimizationInstructions.gangScheduling
        if gang is None:
            return
        base = "spec.optimizationInstructions.gangScheduling"
        members = [(f"{base}.podGroups[{g}].members[{m}]", member.componentName)
                   for g, entry in enumerate(gang.podGroups or ()) for m, member in enumerate(entry.members)]
        members += [(f"{base}.podGroup.subGroups[{s}]", sub.componentName)
                    for s, sub in enumerate(gang.podGroup.subGroups if gang.podGroup else ())]
        for field, name in members:
            comp = self.by_name.get(name)
            if comp is None:
                continue
            size, pods = self.subtree(comp, obj), self.pods(comp, obj)
            if size is not None and pods is not None and size > pods:
                yield Finding(f"{field}.componentName", f"gang of {name} needs {size} pods (its subtree scale) "
                              f"but the workload has {pods} pods there", where)


def stream_fallback(path: str) -> bool:
    """A top-level `//` whose left side iterates (`[]`) in one segment of the pipeline."""
    for segment in _split(path, "|"):
        parts = _split(segment, "//")
        if len(parts) > 1 and any(_iterates(p) for p in parts[:-1]):
            return True
    return False


def _iterates(text: str) -> bool:
    return any(_depth_zero(text, k) for k in range(len(text) - 1) if text[k:k + 2] in ("[]", "]?"))


def _depth_zero(text: str, pos: int) -> bool:
    depth, quoted = 0, False
    for k, ch in enumerate(text[:pos]):
        if ch == '"' and (k == 0 or text[k - 1] != "\\"):
            quoted = not quoted
        elif not quoted and ch in "([{":
            depth += 1
        elif not quoted and ch in ")]}":
            depth -= 1
    return depth == 0 and not quoted


def _split(text: str, sep: str) -> list[str]:
    """`text` split on `sep` outside brackets and strings (`//` is not `/`, `|` not `|=`)."""
    parts, start, k = [], 0, 0
    while k < len(text):
        if text.startswith(sep, k) and _depth_zero(text, k) and not text.startswith(sep + "=", k) \
                and not (sep == "|" and text.startswith("||", k)):
            parts.append(text[start:k])
            k += len(sep)
            start = k
            continue
        k += 1
    parts.append(text[start:])
    return parts


def short(path: str, most: int = 100) -> str:
    """A path for a one-line message: on one line, long ones cut in the middle."""
    text = " ".join(path.split())
    return text if len(text) <= most else f"{text[:most // 2 - 2]} ... {text[-(most // 2 - 3):]}"


def _first(text: str) -> str:
    return " ".join(text.split("\n")[0].split()).removeprefix("jq: error: ")


def _failure(message: str) -> str:
    first = _first(message)
    if "cannot be multiplied" in first or "cannot be added" in first:
        return f"a product or sum with an unset field: {first}"
    return f"fails on the sample: {first}"


def lint(karta: Karta, samples: Sequence[tuple[str, Any]]) -> list[Finding]:
    """Every finding of one definition over the samples of its root kind."""
    root = karta.root.kind
    linter = Linter(karta)
    found = linter.static()
    for where, obj in samples:
        if root is not None and (obj.get("apiVersion"), obj.get("kind")) == (root.api_version, root.kind):
            found += linter.sample(obj, where)
    return found
