"""The clusters file: which clusters placer places onto, live or simulated.

    hub: {context: hub, stagingNamespace: placer-staging}      # optional
    clusters:
    - {name: east, context: kind-east, labels: {region: us-east}}   # live: inventoried
    - name: west                                                     # simulated: nodes inline
      labels: {region: us-west}
      nodes:
      - {namePrefix: h100-, count: 16, allocatable: {nvidia.com/gpu: 8, cpu: "96", memory: 1Ti, pods: 110},
         used: {nvidia.com/gpu: 3}, labels: {...}, taints: [{key: k, value: v, effect: NoSchedule}]}

Validated strictly (unknown fields are errors naming their path). Which clusters a
command uses (this file, the kubeconfig's contexts, or the bundled example fleet) is
decided in one place: `placer.inputs.targets.resolve_clusters`.
"""

from __future__ import annotations

import dataclasses
import re
from decimal import Decimal, InvalidOperation
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Final, Literal, Mapping

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import ErrorDetails

from placer.inputs.quotas import QuotaSpec, quota_where, unique_quotas
from placer.inputs.resources import (  # noqa: F401 (re-exported: node and quota amounts share them)
    KNOWN_GPU_RESOURCES,
    MAX_AMOUNT,
    MAX_GROUP_NODES,
    MAX_NODES,
    ResourceName,
    Resources,
    _edits,
    _gpu_typo,
    _quantity_map,
    _resource_name,
)
from placer.model.documents import decode, load_yaml
from placer.model.errors import InputError
from placer.model.fleet import Cluster, Node, StorageClass, Taint
from placer.model.quantity import canonical
from placer.model.topology import label_key_problem, label_value_problem

ENV = "PLACER_CLUSTERS"
DEFAULT_NAME = "clusters.yaml"
EXAMPLE_NAME = "clusters.example.yaml"
# baseline, not restricted: it forbids what lets a pod take over its node (privileged,
# host namespaces and paths, added capabilities) yet admits ordinary GPU workloads, which
# rarely set runAsNonRoot and seccompProfile as restricted demands.
DEFAULT_POD_SECURITY: Final = "baseline"
CLUSTERS_MAX_VALUES = 20_000_000     # a fleet written node by node is large, and still bounded

_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TaintSpec(_Strict):
    key: str = Field(min_length=1)
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


class NodeGroup(_Strict):
    """`count` identical nodes named `namePrefix0..N-1`, or a single node `name`."""

    name: str | None = None
    namePrefix: str | None = None
    count: int = Field(default=1, ge=1, le=MAX_GROUP_NODES)
    allocatable: Resources
    used: Resources = Field(default_factory=dict)
    # a value may hold `{index}`, `{index // N}` or `{index % N}` (chained, e.g.
    # `{index // 18 % 4}`), `index` being the node's position in the group: racks and
    # NVLink cliques of hundreds of nodes in one line (`example.com/rack: "rack-{index // 18}"`)
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[TaintSpec] = Field(default_factory=list)
    unschedulable: bool = False
    ready: bool = True

    @model_validator(mode="after")
    def _patterns(self) -> "NodeGroup":
        for key, value in self.labels.items():
            problem = label_pattern_problem(value)
            if problem:
                raise ValueError(f"labels: {key}: {problem}")
        return self

    def node_labels(self, index: int) -> dict[str, str]:
        """The labels of the group's node at `index`, patterns expanded."""
        return {k: expand_label(v, index) if "{" in v else v for k, v in self.labels.items()}

    @model_validator(mode="after")
    def _naming(self) -> "NodeGroup":
        if (self.name is None) == (self.namePrefix is None):
            raise ValueError("give exactly one of name (a single node) or namePrefix (with count)")
        if self.name is not None and self.count != 1:
            raise ValueError("count applies to namePrefix; a node given by name is one node")
        return self

    def node_names(self) -> list[str]:
        if self.name is not None:
            return [self.name]
        return [f"{self.namePrefix}{i}" for i in range(self.count)]


class PodTemplatePatch(_Strict):
    """Applied to every pod template of objects created on the cluster (hand-off to its
    own scheduler or queue)."""

    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    schedulerName: str | None = None
    nodeSelector: dict[str, str] | None = None
    tolerations: list[dict[str, Any]] | None = None


class ObjectPatch(_Strict):
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None


class StorageClassSpec(_Strict):
    """A simulated cluster's StorageClass: its name, and whether it is the default."""

    name: str = Field(min_length=1)
    default: bool = False

    @model_validator(mode="after")
    def _name(self) -> "StorageClassSpec":
        if not _NAME_RE.match(self.name):
            raise ValueError(f"name {self.name!r}: use lower-case letters, digits, '-' and '.'")
        return self


def _storage_classes(classes: list[StorageClassSpec]) -> list[StorageClassSpec]:
    names = [c.name for c in classes]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise ValueError(f"[{i}].name: StorageClass {name!r} is given twice")
    return classes


def _topology_levels(levels: list[str]) -> list[str]:
    for i, key in enumerate(levels):
        problem = label_key_problem(key)
        if problem:
            raise ValueError(f"[{i}]: {problem}")
        if key in levels[:i]:
            raise ValueError(f"[{i}]: {key!r} is given twice; list each level once, widest first")
    return levels


def _served_kinds(kinds: list[str]) -> list[str]:
    for i, text in enumerate(kinds):
        version, _, kind = text.rpartition("/")
        if not version or not kind[:1].isupper() or version.count("/") > 1:
            raise ValueError(f"[{i}]: {text!r} is not apiVersion/Kind (e.g. jobset.x-k8s.io/v1alpha2/JobSet)")
    return kinds


class ClusterEntry(_Strict):
    name: str
    context: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    nodes: list[NodeGroup] | None = None
    podTemplatePatch: PodTemplatePatch | None = None
    objectPatch: ObjectPatch | None = None
    suspend: Literal["unsuspend", "omit", "keep"] | None = None
    # the Pod Security level placer enforces on namespaces it creates there, and checks
    # workloads against before creating them
    podSecurity: Literal["privileged", "baseline", "restricted"] = DEFAULT_POD_SECURITY
    # topology levels, node label keys from the widest to the narrowest; for a live cluster
    # without them, its Kueue Topology objects (if any) give them
    topology: Annotated[list[str], AfterValidator(_topology_levels)] | None = None
    # how a chosen domain reaches the cluster: `affinity` (default) writes a node affinity
    # into the pod templates; `kueue` leaves Kueue's podset annotations for Kueue's TAS
    topologyHandoff: Literal["affinity", "kueue"] | None = None
    # steering (issue 22): each pod template of a copy gets a node affinity to the nodes the
    # plan chose for its pods, `required` (default), `preferred`, `off`, or `pinned` (required,
    # and the daemon gates each pod until it has pinned it to one planned node)
    steer: Literal["required", "preferred", "off", "pinned"] | None = None
    # a simulated cluster's StorageClasses (claims are checked against them); absent: not
    # known, claims are not checked. A live cluster's are read from it.
    storageClasses: Annotated[list[StorageClassSpec], AfterValidator(_storage_classes)] | None = None
    # a simulated cluster's API: the kinds it serves outside the built-in groups
    # (`jobset.x-k8s.io/v1alpha2/JobSet`), its PriorityClasses and namespaces; unset: not
    # known, taken as accepting anything (a live cluster's own API server says)
    serves: Annotated[list[str], AfterValidator(_served_kinds)] | None = None
    priorityClasses: list[str] | None = None
    namespaces: list[str] | None = None
    # cluster preference (issue 21), live or simulated: a higher `preference` is filled first;
    # `cost` per GPU-hour in any unit (checked in `_policy`, so the error names the cluster)
    preference: int | float | str | None = None
    cost: int | float | str | None = None

    @model_validator(mode="after")
    def _policy(self) -> "ClusterEntry":
        cluster_preference(self.preference, self.name)
        cluster_cost(self.cost, self.name)
        return self

    @model_validator(mode="after")
    def _declared(self) -> "ClusterEntry":
        if self.context and any(v is not None for v in (self.serves, self.priorityClasses, self.namespaces)):
            raise ValueError("serves, priorityClasses and namespaces describe a simulated cluster; "
                             "a live one's API server says what it has")
        return self

    @model_validator(mode="after")
    def _kind(self) -> "ClusterEntry":
        if not _NAME_RE.match(self.name):
            raise ValueError(f"name {self.name!r}: use lower-case letters, digits, '-' and '.'")
        if self.context and self.nodes is not None:
            raise ValueError("give either context (a live cluster) or nodes (a simulated one), not both")
        if not self.context and self.nodes is None:
            raise ValueError("give context (a live cluster) or nodes (a simulated one)")
        if self.context and self.storageClasses is not None:
            raise ValueError("storageClasses: only a simulated cluster declares them (a live one's are read)")
        return self

    @property
    def live(self) -> bool:
        return bool(self.context)


MAX_PREFERENCE = 1_000_000
MAX_COST = Decimal(10**9)
COST_PLACES = 6                       # decimal places a cost may have (the solver counts in millionths)


def cluster_preference(value: Any, name: str) -> int:
    """A cluster's `preference`: an integer, higher filled first (default 0)."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, str, float)) or \
            not str(value).strip().lstrip("-").isdigit() or abs(int(str(value).strip())) > MAX_PREFERENCE:
        raise ValueError(f"cluster {name}: preference: {value!r} is not an integer "
                         f"(-{MAX_PREFERENCE:,} to {MAX_PREFERENCE:,}; higher is filled first)")
    return int(str(value).strip())


def cluster_cost(value: Any, name: str) -> Decimal | None:
    """A cluster's `cost` per GPU-hour: a number >= 0 with at most COST_PLACES decimals."""
    if value is None:
        return None
    try:
        if isinstance(value, bool):
            raise InvalidOperation
        d = Decimal(str(value).strip())
    except (InvalidOperation, ValueError):
        raise ValueError(f"cluster {name}: cost: {value!r} is not a number (per GPU-hour, e.g. 2.5)") from None
    if not d.is_finite() or d < 0 or d > MAX_COST:
        raise ValueError(f"cluster {name}: cost: {value!r} must be a number from 0 to {MAX_COST:,} (per GPU-hour)")
    d = d.normalize()
    if int(d.as_tuple().exponent) < -COST_PLACES:
        raise ValueError(f"cluster {name}: cost: {value!r} has more than {COST_PLACES} decimal places")
    return d


def with_policy(cluster: Cluster, entry: Any) -> Cluster:
    """The cluster with its entry's `preference` and `cost` (live clusters are read elsewhere)."""
    pref = cluster_preference(getattr(entry, "preference", None), cluster.name)
    cost = cluster_cost(getattr(entry, "cost", None), cluster.name)
    if pref == cluster.preference and cost == cluster.cost:
        return cluster
    return dataclasses.replace(cluster, preference=pref, cost=cost)


def context_entry(context: str) -> ClusterEntry:
    """A kubeconfig context taken as a live cluster when there is no clusters file. Not
    validated: context names (EKS ARNs, GKE's project_zone_name) need not be DNS-like."""
    return ClusterEntry.model_construct(name=context, context=context, labels={}, nodes=None,
                                        podTemplatePatch=None, objectPatch=None, suspend=None,
                                        podSecurity=DEFAULT_POD_SECURITY, topology=None, topologyHandoff=None,
                                        steer=None, storageClasses=None, preference=None, cost=None)


def as_entry(value: Any) -> ClusterEntry:
    """A clusters-file entry from a model or a plain mapping (as tests and libraries write them)."""
    if isinstance(value, ClusterEntry):
        return value
    if isinstance(value, Mapping):
        try:
            return ClusterEntry.model_validate(value)
        except ValidationError as e:
            err = e.errors()[0]
            where = f"{_loc(err['loc'])}: " if err["loc"] else ""
            got = f" (got {err['input']!r})" if err["loc"] else ""
            msg = err["msg"].removeprefix("Value error, ")
            raise InputError(f"cluster entry {value.get('name', '?')}: {where}{msg}{got}") from None
    raise TypeError(f"not a cluster entry: {value!r}")


class Hub(_Strict):
    context: str
    stagingNamespace: str = "placer-staging"
    secrets: bool = False           # Secrets in the staging namespace follow their groups (needs read access)


class ClustersFile(_Strict):
    hub: Hub | None = None
    clusters: list[ClusterEntry] = Field(min_length=1)
    quotas: Annotated[list[QuotaSpec], AfterValidator(unique_quotas)] = Field(default_factory=list)   # issue 23

    @model_validator(mode="after")
    def _unique(self) -> "ClustersFile":
        seen: set[str] = set()
        for i, c in enumerate(self.clusters):
            if c.name in seen:
                raise ValueError(f"clusters[{i}].name: duplicate cluster name {c.name!r}")
            seen.add(c.name)
        total = sum(g.count for c in self.clusters for g in c.nodes or ())
        if total > MAX_NODES:
            raise ValueError(f"{total:,} simulated nodes: at most {MAX_NODES:,} in one clusters file")
        return self

    def entry(self, name: str) -> ClusterEntry | None:
        return next((c for c in self.clusters if c.name == name), None)

    def without_live(self) -> "ClustersFile":
        return ClustersFile(hub=None, clusters=[c for c in self.clusters if not c.live], quotas=self.quotas)


# --- parsing ---------------------------------------------------------------------------

def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part in ("function-after", "[key]") or str(part).startswith(("function-", "int", "float", "str")):
            continue
        else:
            out += ("." if out else "") + str(part)
    return out


def _message(e: ErrorDetails) -> str:
    if e["type"] == "extra_forbidden":
        return "unknown field"
    msg = str(e["msg"])
    for prefix in ("Value error, ", "Assertion failed, "):
        msg = msg.removeprefix(prefix)
    return msg


def parse_clusters(data: Any, source: str) -> ClustersFile:
    if not isinstance(data, dict):
        raise InputError("expected a mapping with a `clusters:` list", source=source)
    try:
        return ClustersFile.model_validate(data)
    except ValidationError as exc:
        e = exc.errors()[0]
        where = quota_where(e["loc"], data, _loc) or _loc(e["loc"])
        raise InputError(f"{where}: {_message(e)}" if where else _message(e), source=source) from None


def read_clusters_file(path: str | Path) -> ClustersFile:
    source = str(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise InputError(f"cannot read clusters file: {e.strerror or e}", source=source) from None
    docs = list(load_yaml(decode(raw, source), source, max_values=CLUSTERS_MAX_VALUES))
    if len(docs) > 1:
        raise InputError(f"line {docs[1][1]}: a clusters file is one YAML document", source=source)
    return parse_clusters(docs[0][0] if docs else None, source)


def example_path() -> Path:
    """The bundled example: installed as package data, or at the root of a checkout."""
    try:
        res = resources.files("placer") / "_data" / EXAMPLE_NAME
        if res.is_file():
            return Path(str(res))
    except (ModuleNotFoundError, FileNotFoundError):  # pragma: no cover
        pass
    return Path(__file__).resolve().parents[2] / EXAMPLE_NAME


# --- to the fleet ------------------------------------------------------------------------

def _taint(t: TaintSpec) -> Taint:
    return Taint(t.key, t.value, t.effect)


def simulated_cluster(entry: ClusterEntry) -> Cluster:
    """A cluster whose nodes are given inline."""
    nodes: list[Node] = []
    seen: set[str] = set()
    for group in entry.nodes or ():
        alloc = {r: canonical(r, q) for r, q in group.allocatable.items()}
        used = {r: canonical(r, q) for r, q in group.used.items()}
        taints = tuple(_taint(t) for t in group.taints)
        patterned = any("{" in v for v in group.labels.values())
        shared = dict(group.labels)         # one for the group's nodes, as alloc and used (never changed)
        for index, name in enumerate(group.node_names()):
            if name in seen:
                raise InputError(f"cluster {entry.name}: duplicate node name {name!r}")
            seen.add(name)
            labels = group.node_labels(index) if patterned else shared
            nodes.append(Node(name, alloc, used, labels, taints, group.unschedulable, group.ready))
    storage = None if entry.storageClasses is None else {
        c.name: StorageClass(c.name, c.default) for c in entry.storageClasses}
    return with_policy(Cluster(entry.name, dict(entry.labels), tuple(nodes), topology=tuple(entry.topology or ()),
                               storage_classes=storage, serves=_frozen(entry.serves),
                               priority_classes=_frozen(entry.priorityClasses), namespaces=_frozen(entry.namespaces)),
                       entry)


def _frozen(names: list[str] | None) -> frozenset[str] | None:
    return None if names is None else frozenset(names)


_PATTERN = re.compile(r"\{\s*index((?:\s*(?://|%)\s*\d+)*)\s*\}")
_STEP = re.compile(r"(//|%)\s*(\d+)")


def expand_label(value: str, index: int) -> str:
    """`value` with each `{index ...}` replaced by the node's index through its steps."""
    def one(m: re.Match) -> str:
        n = index
        for op, k in _STEP.findall(m.group(1)):
            n = n // int(k) if op == "//" else n % int(k)
        return str(n)
    return _PATTERN.sub(one, value)


def label_pattern_problem(value: str) -> str | None:
    """Why a node group's label value (possibly a pattern) is not a label value, or None."""
    if "{" in value:
        for m in _PATTERN.finditer(value):
            if any(int(k) == 0 for _, k in _STEP.findall(m.group(1))):
                return f"{value!r}: division or remainder by 0"
        rest = _PATTERN.sub("0", value)
        if "{" in rest or "}" in rest:
            return (f"{value!r}: a pattern is {{index}}, {{index // N}} or {{index % N}} "
                    "(steps may be chained: {index // 18 % 4})")
        problem = label_value_problem(rest)
        return f"{value!r} makes {problem}" if problem else None
    return None         # plain values are taken as given, as before patterns existed
