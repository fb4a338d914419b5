"""The use cases' seams: a Context of given clusters or of none, and submit's request
checks (bad input fails before any cluster is read)."""
from __future__ import annotations

import pytest

from placer.definitions.catalog import load_catalog
from placer.inputs.clusters_file import ClusterEntry
from placer.kube import Kube
from placer.model.errors import InputError
from placer.ops.context import Scope, context_of, local_context
from placer.ops.requests import SubmitRequest


def test_context_of_takes_plain_entries_and_resolves_nothing():
    catalog = load_catalog()
    with context_of([{"name": "a", "context": "ctx-a"}, {"name": "sim", "nodes": []}], catalog,
                    Kube(None), gpu_resources=["amd.com/gpu"]) as ctx:
        assert [e.name for e in ctx.entries] == ["a", "sim"]
        assert all(isinstance(e, ClusterEntry) for e in ctx.entries)
        assert [e.name for e in ctx.live] == ["a"]
        assert ctx.catalog is catalog and ctx.gpu_resources == ("amd.com/gpu",)
        assert ctx.targets.hub is None


def test_local_context_has_no_clusters_and_the_scope_catalog(tmp_path):
    with local_context(Scope(kubeconfig=str(tmp_path / "absent"))) as ctx:
        assert ctx.entries == [] and ctx.live == []
        assert ctx.catalog.kinds() == load_catalog().kinds()


def test_submit_request_refuses_a_bad_time_limit_and_missing_paths(tmp_path):
    with pytest.raises(InputError, match=r"--time-limit 0.0: must be positive"):
        SubmitRequest((str(tmp_path),), time_limit=0.0).check()
    with pytest.raises(InputError):
        SubmitRequest((str(tmp_path / "missing.yaml"),)).check()


def test_submit_request_checks_the_clusters_it_is_given():
    live = context_of([{"name": "a", "context": "ctx-a"}], load_catalog(), Kube(None)).targets
    SubmitRequest(("x.yaml",)).check_clusters(live)
    with pytest.raises(InputError, match="--cluster b: no such cluster"):
        SubmitRequest(("x.yaml",), cluster="b").check_clusters(live)
    simulated = context_of([{"name": "s", "nodes": []}], load_catalog(), Kube(None)).targets
    SubmitRequest(("x.yaml",), dry_run=True).check_clusters(simulated)
    with pytest.raises(InputError, match="every cluster is simulated"):
        SubmitRequest(("x.yaml",)).check_clusters(simulated)


def test_describe_on_a_local_context_reads_files_only(tmp_path):
    from pathlib import Path

    from placer.ops.describe import Described, PodRef, describe
    from placer.ops.requests import DescribeRequest

    job = Path(__file__).resolve().parents[2] / "examples" / "job.yaml"
    with local_context(Scope(kubeconfig=str(tmp_path / "absent"))) as ctx:
        [found] = describe(ctx, DescribeRequest(files=(str(job),)))
        assert found.pods is None and found.pod_dicts is None and found.workload.kind == "Job"
        with pytest.raises(InputError, match="give either -f FILE"):
            describe(ctx, DescribeRequest())
        with pytest.raises(InputError, match="give either -f FILE"):
            describe(ctx, DescribeRequest("job/x", files=(str(job),)))
    live = Described(found.workload, {"main/main": [PodRef("p-0", "n1", "Running")]})
    assert live.pod_dicts == {"main/main": [{"name": "p-0", "node": "n1", "phase": "Running"}]}
