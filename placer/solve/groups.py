"""The problem's pieces as the solver sees them: pod kinds of a group (parts), the group
with its policy and topology units, and a reachable cluster's node classes."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Mapping, Sequence

from placer.model import reasons as R
from placer.model.fleet import Cluster
from placer.model.podspec import DEFAULT_GPU_RESOURCES
from placer.model.workload import Instance, PlacementGroup, PodShape, Workload
from placer.solve.policy import Policy
from placer.solve.scheduling import NodeClass, admitted, fits_resources, mismatch, node_classes

GPU_RESOURCES = tuple(DEFAULT_GPU_RESOURCES)

UNLIMITED = 10**15                 # pod slots on nodes that declare no `pods` allocatable
MANY_CLASSES = 16                  # a pod that may use more classes is searched node by node



def gpus_of(demand: Mapping[str, int], names: Sequence[str] = GPU_RESOURCES) -> int:
    """GPUs of a demand or a free capacity: every resource name configured as a GPU."""
    return sum(demand.get(r, 0) for r in names)


def sort_key(demand: Mapping[str, int], names: Sequence[str] = GPU_RESOURCES) -> tuple:
    return (-gpus_of(demand, names), -demand.get("cpu", 0), -demand.get("memory", 0))


class Shape(tuple):
    """A group's shape (`GroupInfo.shape`): a tuple, hashed once (issue 24: a key of the
    states' memos, looked up 100,000s of times at scale; hashing its nested parts each
    time cost more than the lookup)."""

    def __new__(cls, items) -> "Shape":
        self = super().__new__(cls, items)
        self.__dict__["_hash"] = tuple.__hash__(self)
        return self

    def __hash__(self) -> int:
        return self.__dict__["_hash"]


@dataclass
class Part:
    """One instance of one workload of a group: `pods` identical pods."""

    workload: Workload
    instance: Instance
    demand: dict[str, int]
    pred_key: tuple
    gpu: int
    sort_key: tuple = ()
    # (group index, part index) when a topology request covers these pods: a type of its own
    topo: tuple[int, int] | None = None

    @property
    def pods(self) -> int:
        return self.instance.pods

    @property
    def kind_key(self) -> tuple:
        """Predicates and demand: what decides the node classes the pods may use."""
        got = self.__dict__.get("_kind_key")
        if got is None or got[0] is not self.demand:
            got = self.__dict__["_kind_key"] = (self.demand, (self.pred_key, tuple(sorted(self.demand.items()))))
        return got[1]


def pred_key(shape: PodShape) -> tuple:
    return (tuple(sorted(shape.node_selector.items())), repr(shape.affinity_terms), repr(shape.tolerations),
            shape.runtime_class)


@dataclass
class GroupInfo:
    index: int
    group: PlacementGroup
    policy: Policy
    parts: list[Part]
    rank: int = 0
    eligible: list[int] = field(default_factory=list)
    static: dict[int, R.Reason] = field(default_factory=dict)   # why not on cluster (policy/statics)
    units: list = field(default_factory=list)     # topology requests (placer.solve.domains.Unit)
    ranks: tuple[int, ...] = ()                   # per cluster: how the group ranks it, 0 first (issue 21)
    family: int | None = None                     # a spread family's member (placer.solve.spread)
    quota_key: tuple = ()                         # its use of fleet-wide quotas (issue 23)

    @property
    def key(self) -> str:
        return self.group.key

    @property
    def shape(self) -> tuple:
        """What placing the group depends on: its parts in order (demand, predicates, pods,
        topology tag) and its topology requests."""
        got = self.__dict__.get("_shape")
        if got is None:
            got = self.__dict__["_shape"] = Shape((
                tuple((tuple(sorted(p.demand.items())), p.pred_key, p.pods, p.topo) for p in self.parts),
                tuple(self.units) if self.units else None))
        return got

    @property
    def gpus(self) -> int:
        """Remembered (issue 24: summed afresh 12 million times at 10,000 groups, in the
        greedy plans, the repair and the exchange); `forget` after a part's demand changes."""
        got = self.__dict__.get("_gpus")
        if got is None:
            got = self.__dict__["_gpus"] = sum(p.gpu * p.pods for p in self.parts)
        return got

    @property
    def pods(self) -> int:
        got = self.__dict__.get("_pods")
        if got is None:
            got = self.__dict__["_pods"] = sum(p.pods for p in self.parts)
        return got

    def forget(self) -> None:
        """Its parts changed (a RuntimeClass's overhead): what was remembered of them goes."""
        for name in ("_gpus", "_pods", "_shape", "_runs"):
            self.__dict__.pop(name, None)

    @property
    def priority(self) -> int:
        return self.policy.priority


def _free(node) -> dict[str, int]:
    free = node.free_all()
    if "pods" not in node.allocatable:
        free["pods"] = UNLIMITED
    return free


class ClusterInfo:
    """A reachable cluster's nodes, classes and which classes each pod kind may use."""

    def __init__(self, index: int, cluster: Cluster, by_name: bool, gpu_names: Sequence[str] = GPU_RESOURCES):
        self.index = index
        self.gpu_names = tuple(gpu_names)
        self.cluster = cluster
        # cordoned nodes too: a pod that tolerates the cordon may go there (see `mismatch`)
        self.nodes = [n for n in cluster.nodes if n.ready]
        self.classes: list[NodeClass] = node_classes(self.nodes, by_name=by_name)
        self.pos = pos = {n.name: i for i, n in enumerate(self.nodes)}      # node name -> index
        self.class_nodes = [[pos[n.name] for n in k.nodes] for k in self.classes]
        self.class_free = [_free(k.sample) for k in self.classes]
        self._compat: dict[tuple, tuple[int, ...]] = {}
        self._kinds: dict[tuple, Kinds] = {}              # by a group's shape (`kinds`)
        self.statics: dict[tuple, R.Reason] = {}          # static reasons by pod kind (explain)
        self._pred: dict[tuple, tuple[int, ...]] = {}
        self.may_use: dict[tuple, bool] = {}              # by a group's pod kinds (problem.prepare)
        self.domains: dict[str, list[str | None]] = {}   # topology key -> domain per class

    def matching(self, part: Part) -> tuple[int, ...]:
        """Classes whose nodes pass the pods' selector, affinity and taint predicates."""
        got = self._pred.get(part.pred_key)
        if got is None:
            shape = self.shape(part)
            got = () if shape is None else \
                tuple(k.index for k in self._named(shape) if mismatch(shape, k.sample) is None)
            self._pred[part.pred_key] = got
        return got

    def _named(self, shape: PodShape) -> Sequence[NodeClass]:
        """The classes a pod may match at all: when each of its affinity terms names its nodes
        (`matchFields: metadata.name In`, as steered copies do), only the classes of those nodes
        (a node named in no term fails them all), else every class. Exact: `mismatch` still
        judges each; issue 24: a pinned kind matched against all 500 classes of its cluster."""
        names = _named_nodes(shape.affinity_terms)
        if names is None:
            return self.classes
        by_sample = self._by_sample
        found = {by_sample[n].index: by_sample[n] for n in names if n in by_sample}
        return [found[i] for i in sorted(found)]

    @cached_property
    def _by_sample(self) -> dict[str, NodeClass]:
        """Each class by its sample node's name (with `by_name`, every node's own class)."""
        return {k.sample.name: k for k in self.classes}

    def shape(self, part: Part) -> PodShape | None:
        """The part's pods as this cluster's RuntimeClass admission leaves them (None: refused)."""
        return admitted(part.instance.pod, self.cluster.runtime_classes)

    def compat(self, part: Part) -> tuple[int, ...]:
        """Matching classes on whose (currently free) nodes one such pod fits."""
        key = part.kind_key
        got = self._compat.get(key)
        if got is None:
            got = tuple(k for k in self.matching(part) if fits_resources(part.demand, self.class_free[k]))
            self._compat[key] = got
        return got

    def kinds(self, g: GroupInfo) -> "Kinds":
        """`compat` of each of the group's parts, and its GPU pods per (classes, GPUs per pod):
        what best fit and `may_fit` ask of every group on every cluster they try, remembered
        by the group's shape (issue 24: recomputed on each of 10,000s of tries; most groups
        share their shape with others)."""
        shape = g.shape
        got = self._kinds.get(shape)
        if got is None:
            compat = tuple(self.compat(p) for p in g.parts)
            need: dict[tuple[tuple[int, ...], int], int] = {}
            for p, classes in zip(g.parts, compat):
                if p.gpu:
                    need[(classes, p.gpu)] = need.get((classes, p.gpu), 0) + p.pods
            got = self._kinds[shape] = (compat, tuple((classes, size, pods) for (classes, size), pods in need.items()))
        return got


def _named_nodes(terms: Sequence[Mapping]) -> set[str] | None:
    """Every node name some required affinity term allows, when each term (they are ORed)
    requires `metadata.name In [...]` among its matchFields (ANDed); None otherwise."""
    if not terms:
        return None
    out: set[str] = set()
    for t in terms:
        ins = [f for f in t.get("matchFields") or () if f.get("key") == "metadata.name" and f.get("operator") == "In"]
        if not ins:
            return None
        allowed = set.intersection(*({str(v) for v in f.get("values") or ()} for f in ins))
        out |= allowed
    return out


# per part the classes it may use; per (classes, GPUs per pod) the pods (ClusterInfo.kinds)
Kinds = tuple[tuple[tuple[int, ...], ...], tuple[tuple[tuple[int, ...], int, int], ...]]


def expand(g: GroupInfo) -> list[int]:
    """Pod list of a group as part indices, biggest pods first (first-fit decreasing): `runs`,
    one entry per pod."""
    return [j for j, pods in runs(g) for _ in range(pods)]


def runs(g: GroupInfo) -> list[tuple[int, int]]:
    """A group's pods as (part index, pods) runs, biggest pods first, parts in index order on a
    tie (remembered: the greedy plans and the repair place the same group many times)."""
    got = g.__dict__.get("_runs")
    if got is None:
        order = sorted(range(len(g.parts)), key=lambda j: (g.parts[j].sort_key, j))
        got = g.__dict__["_runs"] = [(j, g.parts[j].pods) for j in order if g.parts[j].pods > 0]
    return got
