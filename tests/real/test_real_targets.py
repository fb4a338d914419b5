"""Plan and submit onto real control planes (hack/kube-env) know which target serves JobSet
(issue 25, item 3): the real kube-apiserver's discovery is the judge. Only west has the
JobSet CRD: the plan picks west (east is first and has room) and gives east's reason; with
neither, submit exits 3 and creates nothing."""
from __future__ import annotations

import pytest

from placer.model.errors import NotFound
from tests.kubeenv import module_crds, wait_for
from tests.real.test_real_submit import jobset, submit, write

pytestmark = pytest.mark.kube

NOT_SERVED = "does not serve JobSet (jobset.x-k8s.io/v1alpha2); install its operator there"
CRD = "jobsets.jobset.x-k8s.io"


def _remove_jobset_crd(real, context: str) -> None:
    c = real.client(context)
    c.delete("customresourcedefinitions", CRD, missing_ok=True)

    def gone() -> bool:
        try:
            c.get("customresourcedefinitions", CRD)
            return False
        except NotFound:
            return True
    wait_for(gone, 120, f"CRD {CRD} deleted on {context}", interval=0.5)
    c.invalidate()


def test_plan_picks_the_real_cluster_serving_jobset_and_submit_exits_3_when_none_does(real, tmp_path):
    crds = module_crds("jobset")       # sigs.k8s.io/jobset's own CRD, pinned in hack/operators-release
    real.nodes("east", count=2, prefix="e8", gpus=8)
    real.nodes("west", count=2, prefix="w8", gpus=8)
    for c in ("east", "west"):
        _remove_jobset_crd(real, c)
    real.install_crds("west", crds)
    ns = real.unique("served")
    path = write(tmp_path, "train.yaml", jobset("train", ns, pods=2, gpus=4))
    code, out = submit(real, tmp_path, path, extra=("--dry-run",))
    assert code == 0 and [p["cluster"] for p in out["placements"]] == ["west"], out
    code, out = submit(real, tmp_path, write(tmp_path, "big.yaml", jobset("big", ns, pods=3, gpus=8)),
                       extra=("--dry-run",))
    assert code == 3 and out["unplaced"][0]["reasons"]["east"] == NOT_SERVED, out
    # neither serves it: unplaced with both reasons, exit 3 (not 1), nothing created anywhere
    _remove_jobset_crd(real, "west")
    code, out = submit(real, tmp_path, path)
    assert code == 3 and not out["failed"] and not out["created"], out
    assert out["unplaced"][0]["reasons"] == {"east": NOT_SERVED, "west": NOT_SERVED}
    for c in ("east", "west"):
        assert ns not in {n["metadata"]["name"] for n in real.client(c).list("namespaces").items}
