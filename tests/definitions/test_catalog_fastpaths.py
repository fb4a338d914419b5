"""Both sides of the catalog's speed shortcuts: a cheap path for the common spelling and
the general expression for everything else (Milvus version parsing, PyTorchJob replica
type case, KServe stop annotation). Manifests are written here."""

from __future__ import annotations

import pytest

from placer.definitions.interpret import interpret
from tests.definitions.catalog_helpers import catalog, container, gangs, pods_by_instance, template

MILVUS = catalog("milvus")
PYTORCH = catalog("pytorchjob")
KSERVE = catalog("inferenceservice")


def milvus(components):
    return {"apiVersion": "milvus.io/v1beta1", "kind": "Milvus", "metadata": {"name": "vec", "namespace": "s"},
            "spec": {"mode": "cluster", "components": components}}


@pytest.mark.parametrize("components,version", [
    ({"image": "milvusdb/milvus:v2.5.16"}, 205),            # plain digits: no regex
    ({"version": "2.6.1"}, 206),
    ({"image": "milvusdb/milvus:v2.5-gpu"}, 205),           # minor with a suffix: the regex
    ({"image": "milvusdb/milvus:2.5rc1"}, 205),
    ({"image": "milvusdb/milvus:v02.05.1"}, 205),           # leading zeros, either way
    ({"image": "milvusdb/milvus:latest"}, 206),             # no version: operator default 2.6
    ({"image": "milvusdb/milvus:vv2.5"}, 206),
    ({"version": "x2.5", "image": "milvusdb/milvus:v2.5.1"}, 206),   # version wins, unparsable
])
def test_milvus_version_fast_path_and_regex_agree(components, version):
    got = set(pods_by_instance(interpret(milvus(components), MILVUS)))
    # < 2.6: indexNode, no streaming node; >= 2.6: streaming node, no indexNode
    assert ("component/indexNode" in got) == (version < 206)
    assert ("component/streamingNode" in got) == (version >= 206)


def test_pytorchjob_unusual_key_case_falls_back_to_ascii_downcase():
    spec = {"restartPolicy": "OnFailure", "template": template(container("pytorch", gpu=1))}
    obj = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "ddp", "namespace": "ml"},
           "spec": {"pytorchReplicaSpecs": {"MASTER": spec, "WoRkEr": {**spec, "replicas": 2}, "Chief": spec}}}
    w = interpret(obj, PYTORCH)
    assert pods_by_instance(w) == {"replica/Master": 1, "replica/Worker": 2, "replica/Chief": 1}
    assert [i.selector["training.kubeflow.org/replica-type"] for i in w.instances] == ["master", "worker", "chief"]
    assert [m[1] for m in w.gangs[0].members] == ["Master", "Worker", "Chief"]
    assert gangs(w) == [("ddp", 4, 4, 4)]


@pytest.mark.parametrize("stop,pods", [("true", 0), ("TRUE", 0), ("True", 0), ("false", 2), ("no", 2), (True, 0)])
def test_kserve_stop_annotation_any_case(stop, pods):
    obj = {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
           "metadata": {"name": "chat", "namespace": "s",
                        "annotations": {"serving.kserve.io/deploymentMode": "Standard",
                                        "serving.kserve.io/stop": stop}},
           "spec": {"predictor": {"minReplicas": 2, "model": {"modelFormat": {"name": "huggingface"},
                                                              "resources": {"requests": {"cpu": "1"}}}}}}
    assert pods_by_instance(interpret(obj, KSERVE)) == {"predictor/predictor": pods}
