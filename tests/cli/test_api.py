"""The library API re-exports every command's use case with its request and result types,
and they run from Python on one Context as the CLI runs them."""
from __future__ import annotations

from pathlib import Path

from placer import api
from placer.inputs.clusters_file import read_clusters_file
from placer.kube import Kube

ROOT = Path(__file__).resolve().parents[2]


def test_every_exported_name_is_there():
    assert [n for n in api.__all__ if not hasattr(api, n)] == []
    for name in ("plan_files", "plan_in", "submit", "preview", "get_placed", "delete", "describe",
                 "plan_with_options", "cluster_snapshots"):
        assert callable(getattr(api, name)), name


def test_a_dry_run_submit_and_its_preview_on_a_simulated_fleet(tmp_path):
    entries = [e for e in read_clusters_file(str(ROOT / "clusters.example.yaml")).clusters if not e.context]
    with api.context_of(entries, api.load_catalog(), Kube(str(tmp_path / "absent"))) as ctx:
        result = api.submit(ctx, api.SubmitRequest((str(ROOT / "examples" / "job.yaml"),), dry_run=True,
                                                   plan_id="p-api", workers=1))
        shown = api.preview(ctx, result, "client")
    assert isinstance(result, api.SubmitResult) and result.dry_run and result.plan is not None
    [p] = result.plan.placements
    [obj] = shown.objects[p.cluster]
    assert obj["kind"] == "Job" and shown.ok and shown.refused == {}


def test_describe_files_through_the_use_case():
    [w] = api.describe_files([str(ROOT / "examples" / "job.yaml")])
    with api.local_context(api.Scope()) as ctx:
        [d] = api.describe(ctx, api.DescribeRequest(files=(str(ROOT / "examples" / "job.yaml"),)))
    assert isinstance(d, api.Described) and d.workload.key == w.key and d.pods is None
