"""Karta-served types get `placer.dev/spread: divide` through their root's scaleDefinition where
it applies (issue 21): a serving root that makes the pods itself with a plain replicas path.
Judged against the built-in definitions: the same units and pods per unit; batch roots and roots
whose pods belong to children are refused with the one-line divide error."""

import pytest

from placer.definitions.catalog import load_catalog
from placer.definitions.interpret import interpret
from placer.model.errors import InputError
from tests.definitions.karta_helpers import require_shared


def deployment(replicas: int) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "serve", "annotations": {"placer.dev/spread": "divide"}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
                         {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}}}}


@pytest.fixture(scope="module")
def kartas():
    return load_catalog([require_shared() / "definitions"], prefer="karta")


def test_karta_deployment_divides_like_the_builtin(kartas):
    builtin = interpret(deployment(6), load_catalog())
    served = interpret(deployment(6), kartas)
    assert served.definition == "apps-deployment-v1"
    a, b = builtin.scaling, served.scaling
    assert a is not None and b is not None
    assert (b.paths, b.replicas, b.units) == (a.paths, a.replicas, a.units) == ((("spec", "replicas"),), (6,), 6)
    assert b.unit.pods == a.unit.pods == 1 and b.unit.gpus == 2 and b.fixed.pods == 0


def test_karta_scale_only_where_it_applies(kartas):
    assert kartas.lookup("apps.nvidia.com/v1alpha1", "NIMService").definition.scale is not None
    assert kartas.lookup("batch/v1", "Job").definition.scale is None            # runs to completion
    assert kartas.lookup("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet").definition.scale is None   # children's pods
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "annotations": {
        "placer.dev/spread": "divide"}}, "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}}
    with pytest.raises(InputError, match=r"divide: Job \(batch/v1\) has no scalable replicas \(definition batch-job-v1"):
        interpret(job, kartas)
