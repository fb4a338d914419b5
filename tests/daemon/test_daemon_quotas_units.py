"""The daemon's FleetQuota pieces without servers (issue 23): an object read as a quota or
refused naming the field, the clusters file's quotas merged with the objects (the object wins a
name clash), and `lent` against figures worked out by hand."""

from __future__ import annotations

import pytest
import yaml

from placer.daemon.quotas import merge, parse
from placer.model.quota import Quota, Quotas, lent

GPU = "nvidia.com/gpu"


def obj(name: str, spec) -> dict:
    return {"apiVersion": "placer.dev/v1alpha1", "kind": "FleetQuota", "metadata": {"name": name}, "spec": spec}


def test_an_object_is_a_clusters_file_quota_named_by_its_metadata():
    q = parse(obj("research", {"members": {"selector": "team=research"}, "nominal": {GPU: 32, "memory": "1Ti"},
                               "borrowingLimit": {GPU: "16"}, "cohort": "lab", "weight": "0.5"}))
    assert (q.name, q.nominal, q.borrowing_limit, q.cohort, str(q.weight)) == (
        "research", {GPU: 32, "memory": 2**40}, {GPU: 16}, "lab", "0.5")
    assert parse(obj("default", {"nominal": {GPU: 8}})).namespaces is None


@pytest.mark.parametrize("spec, says", [
    (None, "spec: missing"),
    ({"nominal": {GPU: 8}}, "spec: members: give namespaces or a selector"),
    ({"members": {"selector": "team=a"}, "nominal": {"nvidia.com/gpus": 8}}, "nvidia.com/gpu"),
    ({"members": {"selector": "team=a"}, "nominal": {GPU: 8}, "borrowingLimit": {GPU: 1}}, "borrowingLimit"),
    ({"members": {"selector": "team in ("}, "nominal": {GPU: 8}}, "selector"),
    ({"members": {"selector": "team=a"}, "nominal": {GPU: 8}, "name": "other"}, "spec.name"),
    ({"members": {"selector": "team=a"}, "nominal": {GPU: 8}, "weight": 0}, "weight"),
])
def test_a_malformed_object_is_refused_naming_the_field(spec, says):
    with pytest.raises(ValueError, match=says.replace("(", r"\(")):
        parse(obj("team-a", spec))


def test_the_file_keeps_its_order_an_object_takes_its_namesake_place_the_rest_follow_by_name():
    file = Quotas((Quota("b", {GPU: 1}), Quota("a", {GPU: 2})))
    got = merge(file, [Quota("z", {GPU: 3}), Quota("a", {GPU: 9}), Quota("c", {GPU: 4})])
    assert [(q.name, q.nominal[GPU]) for q in got.entries] == [("b", 1), ("a", 9), ("c", 4), ("z", 3)]
    assert merge(None, []).entries == ()


def test_lent_is_the_cohorts_borrowing_shared_by_the_lenders_unused_amounts():
    qs = Quotas((Quota("a", {GPU: 32}, cohort="lab"), Quota("b", {GPU: 32}, cohort="lab"),
                 Quota("c", {GPU: 16}, cohort="lab"), Quota("solo", {GPU: 8})))
    # a borrows 12 beyond its 32; b leaves 24 unused, c 8: 12 lent in the ratio 3:1
    got = _lending(lent(qs, {"a": {GPU: 44}, "b": {GPU: 8}, "c": {GPU: 8}, "solo": {GPU: 2}}))
    assert got == {"b": {GPU: 9}, "c": {GPU: 3}}
    # borrowing beyond every unused amount comes from the pool: lent is at most the unused amounts
    got = _lending(lent(qs, {"a": {GPU: 80}, "b": {GPU: 30}, "c": {GPU: 16}}))
    assert got == {"b": {GPU: 2}}


def _lending(lent_by_quota: dict) -> dict:
    """The quotas that lend something, and what (zero amounts dropped)."""
    out = {q: {r: v for r, v in by_r.items() if v} for q, by_r in lent_by_quota.items()}
    return {q: by_r for q, by_r in out.items() if by_r}


def test_the_daemon_takes_a_clusters_file_with_quotas(tmp_path):
    """It refused one before (quotas were not enforced by the daemon); now they are its own."""
    from placer.daemon.config import config_from_file

    path = tmp_path / "c.yaml"
    path.write_text("""hub: {context: hub, stagingNamespace: placer-staging}
clusters:
- {name: alpha, context: alpha}
quotas:
- {name: team-a, members: {selector: "team=a"}, nominal: {nvidia.com/gpu: 8}}
""")
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "hub",
        "clusters": [{"name": n, "cluster": {"server": "https://127.0.0.1:1"}} for n in ("hub", "alpha")],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": n, "context": {"cluster": n, "user": "u"}} for n in ("hub", "alpha")]}))
    config = config_from_file(str(path), batch_window=0.2, reschedule_after=None, time_limit=1.0,
                              kubeconfig=str(kubeconfig))
    assert [(q.name, q.nominal) for q in config.quotas.entries] == [("team-a", {GPU: 8})]
