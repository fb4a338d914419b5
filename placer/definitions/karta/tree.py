"""The component tree of a valid Karta (owners, ancestors, the components that have pods),
and the layout of the rows gathered per pod component."""

from __future__ import annotations

from placer.definitions.karta.schema import Component, Karta

ROW = ("id", "replicas", "min", "max")          # then the pod-spec columns of the component's form
TEMPLATE_FORM = ("template",)
SPEC_FORM = ("spec", "metadata")
FRAGMENT_FORM = ("containersPath", "containerPath", "resourcesPath", "labelsPath", "annotationsPath",
                  "schedulerNamePath", "priorityClassNamePath", "nodeAffinityPath", "podAffinityPath")



class Tree:
    def __init__(self, karta: Karta):
        self.karta = karta
        self.by_name = {c.name: c for c in karta.components}
        self.pod_components = [c for c in karta.components if c.has_pods]

    def ancestors(self, comp: Component) -> list[Component]:
        """Owners from the nearest up to the root (validation rules out cycles)."""
        out: list[Component] = []
        current = comp
        while current.ownerRef and current.ownerRef in self.by_name and len(out) < len(self.by_name):
            current = self.by_name[current.ownerRef]
            out.append(current)
        return out

    def chain(self, comp: Component) -> list[Component]:
        return [comp, *self.ancestors(comp)]

    def in_subtree(self, comp: Component, top: str) -> bool:
        return any(c.name == top for c in self.chain(comp))

    def pod_index(self, comp: Component) -> int:
        return next(n for n, c in enumerate(self.pod_components) if c.name == comp.name)


def form(comp: Component) -> tuple[str, ...]:
    spec = comp.specDefinition
    assert spec is not None
    if spec.podTemplateSpecPath:
        return TEMPLATE_FORM
    if spec.podSpecPath:
        return SPEC_FORM
    return FRAGMENT_FORM


def form_paths(comp: Component) -> dict[str, str | None]:
    spec = comp.specDefinition
    assert spec is not None
    frag = spec.fragmentedPodSpecDefinition
    return {"template": spec.podTemplateSpecPath, "spec": spec.podSpecPath, "metadata": spec.metadataPath,
            **{name: getattr(frag, name) if frag else None for name in FRAGMENT_FORM}}


def columns(comp: Component) -> dict[str, int]:
    return {name: n for n, name in enumerate(ROW + form(comp))}
