"""Catalog definition of Milvus (milvus-operator, milvus.io/v1beta1): FACTS.md section 11.
Manifests are written here."""

from __future__ import annotations

import pytest
import yaml

from placer.definitions.interpret import interpret, patch_pod_templates
from placer.model.workload import Phase
from tests.definitions.catalog_helpers import EXAMPLES_DIR, GI, GPU, PATCH, catalog, cond, pods_by_instance, with_status
from tests.definitions.serving_helpers import check_patch

MILVUS = catalog("milvus")


def milvus(components=None, *, mode=None, name="vec", **spec):
    s = dict(spec)
    if mode:
        s["mode"] = mode
    if components is not None:
        s["components"] = components
    return {"apiVersion": "milvus.io/v1beta1", "kind": "Milvus",
            "metadata": {"name": name, "namespace": "search"}, "spec": s}


def res(cpu="1", memory="4Gi", gpu=0):
    r = {"cpu": cpu, "memory": memory, **({GPU: gpu} if gpu else {})}
    return {"requests": r, "limits": dict(r)}


V25, V26 = "milvusdb/milvus:v2.5.16", "milvusdb/milvus:v2.6.2"


def keys(w):
    return pods_by_instance(w)


def test_milvus_default_is_standalone_one_pod():
    w = interpret({"apiVersion": "milvus.io/v1beta1", "kind": "Milvus", "metadata": {"name": "m"}}, MILVUS)
    assert keys(w) == {"component/standalone": 1}
    (inst,) = w.instances
    assert inst.selector == {"app.kubernetes.io/instance": "m", "app.kubernetes.io/name": "milvus",
                             "app.kubernetes.io/component": "standalone"}
    assert w.gangs == ()


def test_milvus_standalone_replicas():
    assert keys(interpret(milvus({"standalone": {"replicas": 2}}), MILVUS)) == {"component/standalone": 2}


@pytest.mark.parametrize("components,expected", [
    # Milvus < 2.6: mixCoord by default, indexNode, no streaming node
    ({"image": V25}, {"proxy": 1, "mixCoord": 1, "dataNode": 1, "queryNode": 1, "indexNode": 1}),
    # >= 2.6 (and the operator's default image): no indexNode, streaming on
    ({"image": V26}, {"proxy": 1, "mixCoord": 1, "dataNode": 1, "queryNode": 1, "streamingNode": 1}),
    ({}, {"proxy": 1, "mixCoord": 1, "dataNode": 1, "queryNode": 1, "streamingNode": 1}),
    ({"version": "2.5.4"}, {"proxy": 1, "mixCoord": 1, "dataNode": 1, "queryNode": 1, "indexNode": 1}),
    ({"image": V26, "streamingMode": False}, {"proxy": 1, "mixCoord": 1, "dataNode": 1, "queryNode": 1}),
    ({"image": V25, "streamingMode": True},
     {"proxy": 1, "mixCoord": 1, "dataNode": 1, "queryNode": 1, "indexNode": 1, "streamingNode": 1}),
    # separate coords given: root/data/query/index coord instead of mixCoord (missing ones defaulted)
    ({"image": V25, "rootCoord": {"replicas": 2}, "queryCoord": {}},
     {"proxy": 1, "rootCoord": 2, "dataCoord": 1, "queryCoord": 1, "indexCoord": 1, "dataNode": 1,
      "queryNode": 1, "indexNode": 1}),
    ({"image": V25, "mixCoord": {"replicas": 2}, "rootCoord": {}},
     {"proxy": 1, "mixCoord": 2, "dataNode": 1, "queryNode": 1, "indexNode": 1}),
    # replicas -1 hands over to an HPA: counted as 1; explicit counts kept; cdc only when given
    ({"image": V26, "proxy": {"replicas": -1}, "queryNode": {"replicas": 4}, "cdc": {}},
     {"proxy": 1, "mixCoord": 1, "dataNode": 1, "queryNode": 4, "streamingNode": 1, "cdc": 1}),
    # a standalone section is ignored in cluster mode
    ({"image": V26, "standalone": {"replicas": 3}},
     {"proxy": 1, "mixCoord": 1, "dataNode": 1, "queryNode": 1, "streamingNode": 1}),
])
def test_milvus_cluster_components_by_version(components, expected):
    w = interpret(milvus(components, mode="cluster"), MILVUS)
    assert keys(w) == {f"component/{k}": v for k, v in expected.items()}
    sel = {i.instance: i.selector["app.kubernetes.io/component"] for i in w.instances}
    assert all(v == k.lower() for k, v in sel.items())


def test_milvus_rolling_mode_counts_query_node_once():
    for mode in (2, 3):
        w = interpret(milvus({"image": V26, "rollingMode": mode, "queryNode": {"replicas": 2}}, mode="cluster"),
                      MILVUS)
        assert keys(w)["component/queryNode"] == 2


def test_milvus_global_spec_merged_with_component_override():
    comps = {"image": "milvusdb/milvus:v2.5.16-gpu", "resources": res("1", "4Gi"),
             "nodeSelector": {"pool": "general"}, "podLabels": {"team": "search"},
             "tolerations": [{"key": "general", "operator": "Exists"}],
             "queryNode": {"resources": res("8", "48Gi", gpu=1), "nodeSelector": {"pool": "gpu"},
                           "podLabels": {"role": "qn"}},
             "schedulerName": "kai-scheduler"}
    w = interpret(milvus(comps, mode="cluster"), MILVUS)
    by = {i.instance: i for i in w.instances}
    assert by["queryNode"].pod.requests == {"cpu": 8000, "memory": 48 * GI, GPU: 1}
    assert by["queryNode"].pod.node_selector == {"pool": "gpu"}
    assert by["queryNode"].pod.labels == {"team": "search", "role": "qn"}
    assert by["proxy"].pod.requests == {"cpu": 1000, "memory": 4 * GI}
    assert by["proxy"].pod.node_selector == {"pool": "general"}
    assert by["proxy"].pod.tolerations == ({"key": "general", "operator": "Exists"},)
    assert all(i.pod.scheduler_name == "kai-scheduler" for i in w.instances)
    assert w.gpus == 1 and w.pods == 5


def test_milvus_deployment_groups_are_extra_deployments():
    comps = {"image": V26,
             "proxy": {"groups": [{"name": "a", "replicas": 1}, {"name": "b", "replicas": 2}]},
             "queryNode": {"resources": res("4", "16Gi", gpu=1),
                           "groups": [{"name": "z1", "replicas": 2, "nodeSelector": {"zone": "1"}},
                                      {"name": "z2", "nodeSelector": {"zone": "2"}, "labels": {"g": "2"}}]},
             "dataNode": {"groups": [{"name": "hpa", "replicas": -1}]}}
    w = interpret(milvus(comps, mode="cluster"), MILVUS)
    assert keys(w) == {"component/mixCoord": 1, "component/streamingNode": 1,
                       "proxyGroup/proxy-a": 1, "proxyGroup/proxy-b": 2,
                       "dataNodeGroup/datanode-hpa": 1,
                       "queryNodeGroup/querynode-z1": 2, "queryNodeGroup/querynode-z2": 1}
    by = {i.instance: i for i in w.instances}
    assert by["querynode-z1"].pod.node_selector == {"zone": "1"} and by["querynode-z1"].gpus_per_pod == 1
    assert by["querynode-z2"].pod.labels == {"g": "2"}
    assert by["querynode-z2"].selector == {
        "app.kubernetes.io/instance": "vec", "app.kubernetes.io/name": "milvus",
        "app.kubernetes.io/component": "querynode", "milvus.io/deployment-group": "z2"}
    assert w.gpus == 3


def test_milvus_streaming_groups_need_streaming():
    comps = {"image": V25, "streamingNode": {"groups": [{"name": "g", "replicas": 2}]}}
    assert "streamingNodeGroup/streamingnode-g" not in keys(interpret(milvus(comps, mode="cluster"), MILVUS))
    comps["streamingMode"] = True
    assert keys(interpret(milvus(comps, mode="cluster"), MILVUS))["streamingNodeGroup/streamingnode-g"] == 2


DEPS_READY = [cond("EtcdReady"), cond("StorageReady"), cond("MsgStreamReady")]


@pytest.mark.parametrize("status,phase", [
    (None, Phase.PENDING),
    ({"status": "Pending", "conditions": [cond("EtcdReady", "False", reason="EtcdNotReady"),
                                          cond("StorageReady"), cond("MsgStreamReady")]}, Phase.PENDING),
    ({"status": "Pending", "conditions": DEPS_READY + [cond("MilvusReady", "False", reason="MilvusComponentNotHealthy")]},
     Phase.INITIALIZING),
    ({"status": "Healthy", "conditions": DEPS_READY + [cond("MilvusReady"), cond("MilvusUpdated")],
      "endpoint": "vec-milvus.search:19530"}, Phase.RUNNING),
    ({"status": "Unhealthy", "conditions": DEPS_READY + [cond("MilvusReady", "False", message="querynode down")]},
     Phase.FAILED),
    ({"status": "Stopped"}, Phase.PENDING),
])
def test_milvus_status(status, phase):
    w = interpret(with_status(milvus(), status), MILVUS)
    assert w.phase == phase
    if phase == Phase.FAILED:
        assert "querynode down" in w.message


def test_milvus_patch_round_trip_components():
    comps = {"image": V25, "podLabels": {"team": "search"},
             "queryNode": {"replicas": 2, "nodeSelector": {"pool": "gpu"}, "podLabels": {"r": "q"}},
             "proxy": {"tolerations": [{"key": "edge", "operator": "Exists"}]}}
    obj = milvus(comps, mode="cluster")
    names = ("proxy", "mixCoord", "dataNode", "queryNode", "indexNode")
    allowed = [("spec", "components", n, f) for n in names
               for f in ("podLabels", "podAnnotations", "nodeSelector", "tolerations", "schedulerName")]
    patched = check_patch(obj, MILVUS, allowed)
    # the operator's defaulted components get their own section: no coord is added
    assert set(patched["spec"]["components"]) - set(comps) == {"mixCoord", "dataNode", "indexNode"}
    assert patched["spec"]["components"]["queryNode"]["podLabels"] == {"r": "q", **PATCH["labels"]}


def test_milvus_groups_patch_reaches_groups_and_their_component():
    """Groups have no schedulerName of their own: they run their component's, so the
    patch writes it there (writeFrom: object); every other patch key reaches the group."""
    comps = {"image": V26, "queryNode": {"groups": [{"name": "z1", "replicas": 2}]}}
    obj = milvus(comps, mode="cluster")
    patched = patch_pod_templates(obj, MILVUS, PATCH)
    group = patched["spec"]["components"]["queryNode"]["groups"][0]
    assert group["labels"] == PATCH["labels"] and group["nodeSelector"] == PATCH["nodeSelector"]
    assert "schedulerName" not in group
    assert patched["spec"]["components"]["queryNode"]["schedulerName"] == PATCH["schedulerName"]
    w = interpret(patched, MILVUS)
    assert all(PATCH["annotations"].items() <= i.pod.annotations.items() for i in w.instances)
    groups = [i for i in w.instances if i.component != "component"]
    assert groups and all(i.pod.scheduler_name == PATCH["schedulerName"] for i in groups)
    assert w.pods == interpret(obj, MILVUS).pods


def test_milvus_example():
    (obj,) = [d for d in yaml.safe_load_all((EXAMPLES_DIR / "milvus.yaml").read_text()) if d]
    w = interpret(obj, MILVUS)
    assert keys(w) == {"component/proxy": 2, "component/mixCoord": 1, "component/dataNode": 1,
                       "component/queryNode": 1, "component/indexNode": 1}
    assert (w.pods, w.gpus) == (6, 1)
