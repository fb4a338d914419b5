"""Issue 23 end to end: the clusters file's `quotas:` section read into frozen quotas, bad
values one line naming the file, the quota and the field (exit 2), and the issue's fleet
(three quotas in one cohort, nominal 32, 32 and 16 GPUs, on 96 GPUs) through
`placer plan -o json`, judged by counting the plan's GPUs per team."""

from __future__ import annotations

import json
from decimal import Decimal

import pytest
from typer.testing import CliRunner

from placer.cli import app
from placer.inputs.clusters_file import parse_clusters
from placer.inputs.quotas import to_quotas
from placer.model.errors import InputError

runner = CliRunner()

FLEET = """clusters:
- name: east
  nodes: [{namePrefix: east-, count: 4, allocatable: {nvidia.com/gpu: 8, cpu: "96", memory: 1Ti}}]
- name: west
  nodes: [{namePrefix: west-, count: 4, allocatable: {nvidia.com/gpu: 8, cpu: "96", memory: 1Ti}}]
- name: onprem
  nodes: [{namePrefix: onprem-, count: 4, allocatable: {nvidia.com/gpu: 8, cpu: "96", memory: 1Ti}}]
"""
QUOTAS = """quotas:
- name: research
  members: {namespaces: [research, ml]}
  nominal: {nvidia.com/gpu: 32}
  borrowingLimit: {nvidia.com/gpu: 8}
  cohort: lab
  weight: 2
- {name: product, members: {namespaces: [product]}, nominal: {nvidia.com/gpu: 32}, cohort: lab}
- {name: interns, members: {selector: "team=interns"}, nominal: {nvidia.com/gpu: 16}, cohort: lab}
"""


@pytest.fixture(autouse=True)
def _isolated(unconfigured):
    return unconfigured             # see tests/conftest.py


def test_the_quotas_section_is_read_into_frozen_quotas():
    import yaml
    q = to_quotas(parse_clusters(yaml.safe_load(FLEET + QUOTAS), "c.yaml").quotas)
    assert q is not None and [e.name for e in q.entries] == ["research", "product", "interns"]
    r = q.entries[0]
    assert (r.namespaces, dict(r.nominal), dict(r.borrowing_limit or {}), r.cohort, r.weight) == (
        frozenset({"research", "ml"}), {"nvidia.com/gpu": 32}, {"nvidia.com/gpu": 8}, "lab", Decimal(2))
    with pytest.raises(AttributeError):
        r.nominal = {}  # type: ignore[misc]
    assert q.entries[2].selector_text == "team=interns"


@pytest.mark.parametrize("entry, message", [
    ("{name: research, members: {namespaces: [r]}, nominal: {nvidia.com/gpus: 8}}",
     "quotas: research: nominal: unknown resource 'nvidia.com/gpus': did you mean nvidia.com/gpu?"),
    ("{name: research, members: {namespaces: [r]}, nominal: {nvidia.com/gpu: -1}}",
     "quotas: research: nominal: nvidia.com/gpu: -1 is out of range"),
    ("{name: research, nominal: {nvidia.com/gpu: 8}}",
     "quotas: research: members: give namespaces or a selector (only the default entry has none)"),
    ("{name: research, members: {namespaces: [r], selector: a=b}, nominal: {nvidia.com/gpu: 8}}",
     "quotas: research: members: give exactly one of namespaces or selector"),
    ("{name: research, members: {selector: 'a in b'}, nominal: {nvidia.com/gpu: 8}}",
     "quotas: research: members: selector: invalid label selector"),
    ("{name: research, members: {namespaces: [r]}, nominal: {nvidia.com/gpu: 8}, borrowingLimit: {cpu: 1}}",
     "quotas: research: borrowingLimit: a quota without a cohort borrows nothing; give a cohort"),
    ("{name: research, members: {namespaces: [r]}, nominal: {nvidia.com/gpu: 8}, cohort: lab, "
     "borrowingLimit: {cpu: 1}}", "quotas: research: borrowingLimit: cpu has no nominal amount"),
    ("{name: research, members: {namespaces: [r]}, nominal: {nvidia.com/gpu: 8}, weight: 0}",
     "quotas: research: weight: 0 must be a number above 0"),
    ("{name: default, members: {namespaces: [r]}, nominal: {nvidia.com/gpu: 8}}",
     "quotas: default: members: the default entry takes the workloads of no other quota"),
    ("{name: research, members: {namespaces: [r]}, nominal: {nvidia.com/gpu: 8}, burst: 1}",
     "quotas: research: burst: unknown field"),
])
def test_a_bad_quota_is_one_line_naming_file_quota_and_field(unconfigured, entry, message):
    (unconfigured / "c.yaml").write_text(FLEET + f"quotas:\n- {entry}\n")
    (unconfigured / "j.yaml").write_text(_jobs([("research", "research", 1)]))
    r = runner.invoke(app, ["plan", "--dry-run", "--clusters", "c.yaml", "-f", "j.yaml"])
    assert r.exit_code == 2, r.output
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: c.yaml: {message}"), lines


def test_a_quota_given_twice_is_refused():
    import yaml
    data = yaml.safe_load(FLEET + QUOTAS)
    data["quotas"].append(dict(data["quotas"][1]))
    with pytest.raises(InputError, match=r"c.yaml: quotas: quota 'product' is given twice \(entries 1 and 3\)"):
        parse_clusters(data, "c.yaml")


def _jobs(teams) -> str:
    docs = []
    for ns, team, n in teams:
        for i in range(n):
            docs.append(f"""apiVersion: batch/v1
kind: Job
metadata: {{name: {team}-{i}, namespace: {ns}, labels: {{team: {team}}}}}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - {{name: main, image: busybox, resources: {{limits: {{nvidia.com/gpu: 8}}}}}}
""")
    return "---\n".join(docs)


def test_the_issue_fleet_plan_never_exceeds_a_quota_and_says_why(unconfigured):
    """Three quotas in cohort lab (32, 32, 16 GPUs; research may borrow 8) on 96 GPUs, each
    team wanting 56: the plan fills the fleet, research stays within 40, the cohort within
    its 80 nominal plus the 16-GPU pool, and every workload left out has a quota reason."""
    (unconfigured / "c.yaml").write_text(FLEET + QUOTAS)
    (unconfigured / "j.yaml").write_text(_jobs([("research", "research", 7), ("product", "product", 7),
                                                ("misc", "interns", 7)]))
    r = runner.invoke(app, ["plan", "--dry-run", "--time-limit", "20", "--clusters", "c.yaml", "-f", "j.yaml",
                            "-o", "json"])
    assert r.exit_code == 3, r.output               # something unplaced
    doc = json.loads(r.stdout)
    per: dict[str, int] = {}
    for p in doc["placements"]:
        team = p["workload"].split("/")[1].rsplit("-", 1)[0]
        per[team] = per.get(team, 0) + p["gpus"]
    assert sum(per.values()) == 96
    assert per.get("research", 0) <= 40 and sum(per.values()) <= 80 + 16
    assert len(doc["unplaced"]) == 21 - 12
    for u in doc["unplaced"]:
        assert set(u["reasonCodes"].values()) == {"OverQuota"}, u
        assert all(t.startswith("over quota: ") for t in u["reasons"].values())
    # the plan's quota figures, against the placements counted here
    nominal = {"research": 32, "product": 32, "interns": 16}
    got = {q["name"]: q for q in doc["quotas"]}
    assert set(got) == set(nominal)
    for name, q in got.items():
        used = per.get(name, 0)
        assert q["cohort"] == "lab" and q["nominal"] == {"nvidia.com/gpu": nominal[name]}
        assert q["used"] == {"nvidia.com/gpu": used} and q["pending"] == {"nvidia.com/gpu": 56 - used}
        assert q["borrowed"] == {"nvidia.com/gpu": max(0, used - nominal[name])}


def test_submit_dry_run_plans_within_the_quotas_too(unconfigured):
    (unconfigured / "c.yaml").write_text(FLEET + QUOTAS)
    (unconfigured / "j.yaml").write_text(_jobs([("research", "research", 7), ("product", "product", 7),
                                                ("misc", "interns", 7)]))
    r = runner.invoke(app, ["submit", "--dry-run", "--time-limit", "20", "--clusters", "c.yaml", "-f", "j.yaml"])
    assert r.exit_code == 3, r.output
    assert "9 unplaced" in r.stdout and r.stdout.count("over quota: ") >= 9 * 3
