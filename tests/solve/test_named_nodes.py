"""A pod kind whose affinity names its nodes (`matchFields: metadata.name In`, as the
daemon's steered copies are) is matched against those nodes' classes only (issue 24: a
pinned kind was judged on every class of its cluster, 500 at 20 x 500): the classes found
are those a scan of every class finds, whatever the terms."""

from __future__ import annotations

import random
from dataclasses import replace
from types import SimpleNamespace

import placer.solve as S
from placer.solve.scheduling import mismatch
from tests.builders import fleet, groups, wl


def _term(rng: random.Random, names: list[str]) -> dict:
    term: dict = {}
    if rng.random() < 0.85:
        picked = rng.sample(names, rng.randint(1, 4)) + (["nowhere"] if rng.random() < 0.2 else [])
        term["matchFields"] = [{"key": "metadata.name", "operator": "In", "values": picked}]
        if rng.random() < 0.2:      # a second name requirement in the same term: both must hold
            term["matchFields"].append({"key": "metadata.name", "operator": "In", "values": rng.sample(names, 3)})
        if rng.random() < 0.2:
            term["matchFields"].append({"key": "metadata.name", "operator": "NotIn", "values": picked[:1]})
    if rng.random() < 0.4 or not term:
        term["matchExpressions"] = [{"key": "z", "operator": rng.choice(["In", "NotIn"]), "values": ["a"]}]
    return term


def test_named_kinds_match_the_classes_a_scan_of_every_class_finds():
    rng = random.Random(7)
    for exact in (True, False):
        fl = fleet("c0: 6x8 | 3x4 used=1 z=a | 4x8 used=3 | 2x8 z=b")
        problem = S.prepare(fl, groups(wl("ml/w", "1x1")), node_exact=exact)
        info = problem.infos[0]
        pod = problem.groups[0].parts[0].instance.pod
        names = [n.name for n in info.nodes]
        for case in range(300):
            terms = tuple(_term(rng, names) for _ in range(rng.randint(1, 3)))
            shape = replace(pod, affinity_terms=terms)
            part = SimpleNamespace(pred_key=("case", exact, case), instance=SimpleNamespace(pod=shape))
            want = tuple(k.index for k in info.classes if mismatch(shape, k.sample) is None)
            assert info.matching(part) == want, terms
