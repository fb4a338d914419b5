"""The `run.ai/v1alpha1` `Karta` (NVIDIA Workload Map) schema, validated strictly.

The fields mirror the CRD `kartas.run.ai` (unknown fields are errors, as the API server
rejects them); `rules` adds what the Workload Map validator checks beyond the schema.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from placer.definitions.karta.kind import API_GROUP, API_VERSION, KIND  # noqa: F401 (re-exported)

# the normalized statuses, in the order the library reports them when several match
STATUS_ORDER = ("resuming", "suspending", "suspended", "running", "failed", "completed",
                "initializing", "degraded")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GVK(_Strict):
    group: str
    version: str
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


class ConditionsDefinition(_Strict):
    path: str
    typeFieldName: str = "type"
    statusFieldName: str = "status"
    reasonFieldName: str = "reason"
    messageFieldName: str = "message"


class PhaseDefinition(_Strict):
    path: str


class ConditionMatch(_Strict):
    type: str
    status: str | None = None
    reason: str | None = None


class ExpressionMatch(_Strict):
    expression: str
    expectedResult: str


class Matcher(_Strict):
    """Its parts are ANDed; the matchers of one status are ORed."""

    byPhase: str | None = None
    byConditions: list[ConditionMatch] | None = None
    byExpression: ExpressionMatch | None = None


class StatusMappings(_Strict):
    initializing: list[Matcher] = []
    running: list[Matcher] = []
    completed: list[Matcher] = []
    failed: list[Matcher] = []
    degraded: list[Matcher] = []
    suspended: list[Matcher] = []
    suspending: list[Matcher] = []
    resuming: list[Matcher] = []


class StatusDefinition(_Strict):
    conditionsDefinition: ConditionsDefinition | None = None
    phaseDefinition: PhaseDefinition | None = None
    statusMappings: StatusMappings


class Action(_Strict):
    path: str
    value: str                                # JSON-encoded


class SuspendDefinition(_Strict):
    suspendActions: list[Action]
    resumeActions: list[Action]


class FragmentedPodSpec(_Strict):
    schedulerNamePath: str | None = None
    labelsPath: str | None = None
    annotationsPath: str | None = None
    resourcesPath: str | None = None
    resourceClaimsPath: str | None = None
    podAffinityPath: str | None = None
    nodeAffinityPath: str | None = None
    containersPath: str | None = None
    containerPath: str | None = None
    priorityClassNamePath: str | None = None
    imagePath: str | None = None


class SpecDefinition(_Strict):
    podTemplateSpecPath: str | None = None
    podSpecPath: str | None = None
    metadataPath: str | None = None
    fragmentedPodSpecDefinition: FragmentedPodSpec | None = None


class ScaleDefinition(_Strict):
    replicasPath: str | None = None
    minReplicasPath: str | None = None
    maxReplicasPath: str | None = None


class TypeSelector(_Strict):
    keyPath: str | None = None
    value: str | None = None
    matchLabels: dict[str, str] | None = None


class InstanceSelector(_Strict):
    idPath: str


class ReplicaSelector(_Strict):
    keyPath: str


class PodSelector(_Strict):
    componentTypeSelector: TypeSelector | None = None
    componentInstanceSelector: InstanceSelector | None = None
    replicaSelector: ReplicaSelector | None = None


class Component(_Strict):
    name: str
    kind: GVK | None = None
    ownerRef: str | None = None
    specDefinition: SpecDefinition | None = None
    scaleDefinition: ScaleDefinition | None = None
    statusDefinition: StatusDefinition | None = None
    suspendDefinition: SuspendDefinition | None = None
    instanceIdPath: str | None = None
    podSelector: PodSelector | None = None

    @property
    def has_pods(self) -> bool:
        spec = self.specDefinition
        return spec is not None and any(v is not None for v in spec.model_dump().values())


class StructureDefinition(_Strict):
    rootComponent: Component
    childComponents: list[Component] = []
    additionalChildKinds: list[GVK] = []


class Topology(_Strict):
    topologyName: str
    requiredTopologyLevel: str
    preferredTopologyLevel: str


class SubGroup(_Strict):
    componentName: str
    topology: Topology | None = None


class PodGroup(_Strict):
    name: str
    subGroups: list[SubGroup] = []
    topology: Topology | None = None


class Member(_Strict):
    componentName: str
    groupByKeyPaths: list[str] = []
    filters: list[str] = []


class PodGroupsEntry(_Strict):
    name: str
    members: list[Member]


class GangScheduling(_Strict):
    podGroup: PodGroup | None = None
    podGroups: list[PodGroupsEntry] | None = None


class OptimizationInstructions(_Strict):
    gangScheduling: GangScheduling | None = None


class KartaSpec(_Strict):
    structureDefinition: StructureDefinition
    optimizationInstructions: OptimizationInstructions = OptimizationInstructions()


class Metadata(BaseModel):
    """Object metadata as the API server returns it: only the name matters here."""

    model_config = ConfigDict(extra="allow", frozen=True)
    name: Annotated[str, Field(pattern=r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$")]


class Karta(_Strict):
    apiVersion: str
    kind: str
    metadata: Metadata
    spec: KartaSpec
    status: dict | None = None               # the CRD's status subresource; not read

    @property
    def components(self) -> list[Component]:
        return [self.spec.structureDefinition.rootComponent, *self.spec.structureDefinition.childComponents]

    @property
    def root(self) -> Component:
        return self.spec.structureDefinition.rootComponent
