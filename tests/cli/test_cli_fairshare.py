"""Issue 23, fair share end to end: the issue's fleet (three quotas in cohort lab, nominal 32,
32 and 16 GPUs, on 96 GPUs, so 16 GPUs are a pool nobody's nominal), every team wanting
more than it holds. `placer plan -o json` is judged by counting the plan's GPUs per team
(the shares are computed here from the counts, not read from placer), and `placer get
quotas` must show the same figures in every output format."""

from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from placer.cli import app

runner = CliRunner()

FLEET = """clusters:
- name: east
  nodes: [{namePrefix: east-, count: 4, allocatable: {nvidia.com/gpu: 8, cpu: "96", memory: 1Ti}}]
- name: west
  nodes: [{namePrefix: west-, count: 4, allocatable: {nvidia.com/gpu: 8, cpu: "96", memory: 1Ti}}]
- name: onprem
  nodes: [{namePrefix: onprem-, count: 4, allocatable: {nvidia.com/gpu: 8, cpu: "96", memory: 1Ti}}]
"""
NOMINAL = {"research": 32, "product": 32, "interns": 16}


def _quotas(research_weight: int = 1) -> str:
    return f"""quotas:
- {{name: research, members: {{namespaces: [research]}}, nominal: {{nvidia.com/gpu: 32}}, cohort: lab,
   weight: {research_weight}}}
- {{name: product, members: {{namespaces: [product]}}, nominal: {{nvidia.com/gpu: 32}}, cohort: lab}}
- {{name: interns, members: {{namespaces: [interns]}}, nominal: {{nvidia.com/gpu: 16}}, cohort: lab}}
"""


def _jobs(per_team: dict[str, int], gpus: int = 4) -> str:
    docs = []
    for team, n in per_team.items():
        for i in range(n):
            docs.append(f"""apiVersion: batch/v1
kind: Job
metadata: {{name: {team}-{i}, namespace: {team}}}
spec:
  template:
    spec:
      restartPolicy: Never
      containers:
      - {{name: main, image: busybox, resources: {{limits: {{nvidia.com/gpu: {gpus}}}}}}}
""")
    return "---\n".join(docs)


@pytest.fixture(autouse=True)
def _isolated(unconfigured):
    return unconfigured             # see tests/conftest.py


# each team wants 16 GPUs beyond its nominal amount, in 4-GPU jobs
WANT = {"research": 12, "product": 12, "interns": 8}


def _plan(tmp, weight: int = 1) -> tuple[dict, dict[str, int]]:
    (tmp / "c.yaml").write_text(FLEET + _quotas(weight))
    (tmp / "j.yaml").write_text(_jobs(WANT))
    r = runner.invoke(app, ["plan", "--dry-run", "--time-limit", "30", "--clusters", "c.yaml", "-f", "j.yaml",
                            "-o", "json"])
    assert r.exit_code == 3, r.output               # something unplaced
    doc = json.loads(r.stdout)
    per = {t: 0 for t in NOMINAL}
    for p in doc["placements"]:
        per[p["workload"].split("/")[0]] += p["gpus"]
    return doc, per


def test_the_idle_pool_is_divided_by_fair_share_with_equal_weights(unconfigured):
    """Equal weights, one lendable amount (96): shares are borrowed / 96, so the 16 idle GPUs
    in 4-GPU jobs go 8, 4, 4: the largest share (8/96) is the least any plan reaches. The
    plan without fair share gave one team all 16 and the others none."""
    doc, per = _plan(unconfigured)
    borrowed = {t: per[t] - NOMINAL[t] for t in NOMINAL}
    assert sum(per.values()) == 96
    assert all(per[t] <= NOMINAL[t] + 16 for t in NOMINAL)
    assert sorted(borrowed.values()) == [4, 4, 8], borrowed
    assert doc["summary"]["optimal"] is True
    for u in doc["unplaced"]:
        assert set(u["reasonCodes"].values()) == {"OverQuota"}, u
    got = {q["name"]: q for q in doc["quotas"]}
    for t in NOMINAL:
        assert got[t]["borrowed"] == {"nvidia.com/gpu": borrowed[t]}
        assert got[t]["fairShare"] == pytest.approx(borrowed[t] / 96, abs=1e-6)


def test_weights_divide_the_pool_in_proportion(unconfigured):
    """research weighs 2: its share is borrowed / 96 / 2, so it borrows 8 and the others 4
    each (every share 4/96): the unique plan whose largest share is least."""
    doc, per = _plan(unconfigured, weight=2)
    assert {t: per[t] - NOMINAL[t] for t in NOMINAL} == {"research": 8, "product": 4, "interns": 4}
    assert doc["summary"]["optimal"] is True


def _get(tmp, *extra: str):
    return runner.invoke(app, ["get", "quotas", "--time-limit", "30", "--clusters", "c.yaml", "-f", "j.yaml",
                               *extra])


def test_get_quotas_shows_what_each_quota_holds_in_every_format(unconfigured):
    doc, per = _plan(unconfigured)
    r = _get(unconfigured, "-o", "json")
    assert r.exit_code == 0, r.output
    items = json.loads(r.stdout)
    assert [q["name"] for q in items] == ["research", "product", "interns"]
    gpu = "nvidia.com/gpu"
    for q in items:
        t = q["name"]
        assert set(q) == {"name", "cohort", "nominal", "used", "borrowed", "lent", "pending", "fairShare"}
        assert q["cohort"] == "lab" and q["nominal"] == {gpu: NOMINAL[t]}
        assert q["used"] == {gpu: per[t]} and q["borrowed"] == {gpu: per[t] - NOMINAL[t]}
        assert q["pending"] == {gpu: 4 * WANT[t] - per[t]} and q["lent"] == {gpu: 0}
        assert q["fairShare"] == pytest.approx((per[t] - NOMINAL[t]) / 96, abs=1e-6)
    assert yaml.safe_load(_get(unconfigured, "-o", "yaml").stdout) == items
    assert _get(unconfigured, "-o", "name").stdout.split() == ["quota/research", "quota/product", "quota/interns"]
    assert _get(unconfigured, "-o", "jsonpath={[*].name}").stdout.split() == ["research", "product", "interns"]
    table = _get(unconfigured).stdout.splitlines()
    assert table[0].split() == ["NAME", "COHORT", "NOMINAL", "USED", "BORROWED", "LENT", "PENDING", "FAIR", "SHARE"]
    row = {line.split()[0]: line.split() for line in table[1:]}
    for t in NOMINAL:
        assert row[t][1:8] == ["lab", f"{gpu}={NOMINAL[t]}", f"{gpu}={per[t]}", f"{gpu}={per[t] - NOMINAL[t]}",
                               f"{gpu}=0", f"{gpu}={4 * WANT[t] - per[t]}", f"{(per[t] - NOMINAL[t]) / 96:.4f}"]


def test_a_quota_lends_what_it_leaves_unused_to_its_cohort(unconfigured):
    """interns want nothing: research and product borrow its 16 and the pool's 16."""
    (unconfigured / "c.yaml").write_text(FLEET + _quotas())
    (unconfigured / "j.yaml").write_text(_jobs({"research": 12, "product": 12}))
    r = _get(unconfigured, "-o", "json")
    assert r.exit_code == 0, r.output
    got = {q["name"]: q for q in json.loads(r.stdout)}
    gpu = "nvidia.com/gpu"
    assert got["interns"]["used"] == {gpu: 0} and got["interns"]["lent"] == {gpu: 16}
    assert got["research"]["borrowed"] == got["product"]["borrowed"] == {gpu: 16}


@pytest.mark.parametrize("args, message", [
    (["-f", "j.yaml"], "no quotas: section"),
    (["--clusters", "c.yaml"], "placer get quotas: give the workloads with -f"),
    (["--clusters", "c.yaml", "-f", "j.yaml", "-n", "x", "-A"], "give -n NAMESPACE or -A, not both"),
])
def test_get_quotas_bad_input_is_one_line_exit_2(unconfigured, args, message):
    (unconfigured / "c.yaml").write_text(FLEET + _quotas())
    (unconfigured / "j.yaml").write_text(_jobs({"research": 1}))
    r = runner.invoke(app, ["get", "quotas", *args])
    assert r.exit_code == 2, r.output
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and message in lines[0], lines


def test_get_quotas_without_a_quotas_section_says_so(unconfigured):
    (unconfigured / "c.yaml").write_text(FLEET)
    (unconfigured / "j.yaml").write_text(_jobs({"research": 1}))
    r = runner.invoke(app, ["get", "quotas", "--clusters", "c.yaml", "-f", "j.yaml"])
    assert r.exit_code == 2, r.output
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: c.yaml: no quotas: section"), lines


def test_get_without_quotas_refuses_files(unconfigured):
    (unconfigured / "j.yaml").write_text(_jobs({"research": 1}))
    r = runner.invoke(app, ["get", "-f", "j.yaml"])
    assert r.exit_code == 2, r.output
    assert r.stderr.splitlines() == ["error: -f applies to `placer get quotas`; `placer get` reads what placer placed"]
