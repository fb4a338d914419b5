"""The daemon steers its copies as `submit` does (issue 22): each copy's pod templates carry a
node affinity to the nodes its plan chose on that cluster; a forwarded spec edit keeps them
while the demand is the same and drops them when the edit changes it. Test API server (the
real scheduler's side is tests/real/test_real_steer.py)."""

from __future__ import annotations

from placer.actuate.steer import ANN_NODES, nodes_of
from tests.daemon.daemon_helpers import STAGING, Env, jobset, wait_for

JOBSET = ("jobset.x-k8s.io/v1alpha2", "JobSet")
NODES = {"alpha": {"a0", "a1"}, "beta": {"b0", "b1"}}


def template(copy: dict) -> dict:
    return copy["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


def required_nodes(copy: dict) -> list[str]:
    terms = template(copy).get("affinity", {}).get("nodeAffinity", {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms", [])
    return [f["values"][0] for t in terms for f in t.get("matchFields", ()) if f["key"] == "metadata.name"]


def placed_copy(env: Env, job: dict) -> tuple[str, dict]:
    copies = wait_for(lambda: env.copies(job) or None, what="the copy")
    ((cluster, copy),) = copies.items()
    return cluster, copy


def edit(env: Env, job: dict, **kw) -> None:
    res = env.hub.resource_for(*JOBSET)
    env.hub.patch(res, job["metadata"]["name"], {"spec": jobset(job["metadata"]["name"], **kw)["spec"]}, STAGING)


def test_the_daemons_copy_is_steered_to_its_planned_nodes(env):
    d = env.daemon()
    job = jobset("steered", pods=3, gpus=4)
    env.create(job)
    assert d.wait_idle(20)
    cluster, copy = placed_copy(env, job)
    planned = nodes_of(copy)["replicatedJob/workers"]
    assert set(planned) <= NODES[cluster] and len(planned) == 2          # 3 x 4 GPUs on 8-GPU nodes
    assert required_nodes(copy) == sorted(planned)


def test_a_forwarded_edit_keeps_the_nodes_for_the_same_demand_and_drops_them_for_another(env):
    d = env.daemon()
    job = jobset("edited", pods=2, gpus=2)
    env.create(job)
    assert d.wait_idle(20)
    cluster, copy = placed_copy(env, job)
    planned = required_nodes(copy)
    assert planned
    # the same demand, another image: forwarded, still steered
    res = env.hub.resource_for(*JOBSET)
    spec = jobset("edited", pods=2, gpus=2)["spec"]
    spec["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]["image"] = "trainer:2"
    env.hub.patch(res, "edited", {"spec": spec}, STAGING)
    wait_for(lambda: template(env.copies(job)[cluster])["containers"][0]["image"] == "trainer:2",
             what="the image edit forwarded")
    assert required_nodes(env.copies(job)[cluster]) == planned
    # more GPUs per pod: the plan's nodes were for the old demand, so the copy is not steered
    edit(env, job, pods=2, gpus=4)
    wait_for(lambda: template(env.copies(job)[cluster])["containers"][0]["resources"]["requests"]
             ["nvidia.com/gpu"] == "4", what="the GPU edit forwarded")
    copy = env.copies(job)[cluster]
    assert required_nodes(copy) == []
    assert ANN_NODES not in copy["metadata"].get("annotations", {})
