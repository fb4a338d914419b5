"""What people see of topology: the plan table's domain lines, the SVG picture's nodes
grouped by domain, and `placer describe` showing each gang's requests."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import yaml
from typer.testing import CliRunner

from placer.cli import app
from placer.cli.picture import render
from placer.cli.plan import render_table
from placer.cli.topology_view import topology_lines
from placer.model.fleet import Cluster, Fleet, Node
from placer.model.plan import Placement, Plan, Summary
from placer.model.topology import TopologyChoice

RACK, BLOCK = "example.com/rack", "example.com/block"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
runner = CliRunner()


def plan_with(*placements: Placement) -> Plan:
    return Plan(tuple(placements), (), Summary(len(placements), len(placements), 0, 0, 0.0, True, "optimal"))


def placement(workload: str, topology, nodes=None) -> Placement:
    return Placement(workload, "JobSet", workload, "gb", 8, 2, 0, nodes or {}, topology=tuple(topology))


def test_table_shows_the_domain_under_the_row():
    p = plan_with(placement("ml/train", [TopologyChoice("train", RACK, ("rack-3",))]),
                  placement("ml/plain", []))
    text = render_table(p, width=80).plain
    lines = text.splitlines()
    i = next(k for k, line in enumerate(lines) if line.startswith("ml/train"))
    assert lines[i + 1] == f"    {RACK}=rack-3"
    assert lines[i + 2].startswith("ml/plain")
    assert f"{RACK}=rack-3" in render_table(p, wide=True).plain


def test_many_gangs_are_summed_up_per_domain_and_preferred_is_marked():
    choices = [TopologyChoice(f"llm-{g}", RACK, ("r1" if g % 2 == 0 else "r2",)) for g in range(6)]
    choices.append(TopologyChoice("llm-0", BLOCK, ("b0", "b1"), required=False))
    choices.append(TopologyChoice("llm-0", "nvidia.com/gpu.clique", ("c4",), components=("worker",)))
    assert topology_lines(choices) == [
        f"{RACK}: r1 (llm-0, llm-2, llm-4); r2 (llm-1, llm-3, llm-5)",
        f"{BLOCK}=b0,b1 (preferred)",
        "nvidia.com/gpu.clique [worker]=c4"]
    many = [TopologyChoice(f"g{i}", RACK, ("r1",)) for i in range(5)]
    assert topology_lines(many) == [f"{RACK}: r1 (g0, g1, g2 +2 more)"]


def test_picture_groups_nodes_by_domain_and_names_who_is_inside():
    nodes = tuple(Node(f"n{i}", {"nvidia.com/gpu": 4}, labels={BLOCK: f"b{i // 4}", RACK: f"r{i // 2}"})
                  for i in reversed(range(8)))
    fleet = Fleet((Cluster("gb", nodes=nodes, topology=(BLOCK, RACK, "kubernetes.io/hostname")),))
    p = plan_with(placement("ml/train", [TopologyChoice("train", RACK, ("r1",))], {"n2": {"replicatedJob/t": 1},
                                                                                   "n3": {"replicatedJob/t": 1}}))
    text = render(fleet, p, title="t").export_text()
    lines = [line.strip("│ ").rstrip(" │") for line in text.splitlines()]
    heads = [line for line in lines if line.startswith(f"{BLOCK}=")]
    assert heads == [f"{BLOCK}=b0  {RACK}=r0", f"{BLOCK}=b0  {RACK}=r1  <- ml/train",
                     f"{BLOCK}=b1  {RACK}=r2", f"{BLOCK}=b1  {RACK}=r3"]
    # under each header, exactly the nodes of that domain
    at = lines.index(heads[1])
    assert [line.split()[0] for line in lines[at + 1:at + 3]] == ["n3", "n2"]
    assert f"ml/train (JobSet, 8 GPUs on gb, group ml/train)  {RACK}=r1" in text


def test_picture_of_a_cluster_without_levels_has_no_headers():
    fleet = Fleet((Cluster("x", nodes=(Node("n0", {"nvidia.com/gpu": 2}, labels={RACK: "r0"}),)),))
    assert f"{RACK}=" not in render(fleet, None, title="t").export_text()


def test_describe_shows_requests(tmp_path):
    docs = [d for d in yaml.safe_load_all((EXAMPLES / "pytorchjob.yaml").read_text()) if d]
    pj = copy.deepcopy(docs[0])
    pj["metadata"]["annotations"] = {"placer.dev/topology-preferred": BLOCK}
    pj["spec"]["pytorchReplicaSpecs"]["Worker"]["template"].setdefault("metadata", {})["annotations"] = {
        "kueue.x-k8s.io/podset-required-topology": RACK}
    f = tmp_path / "pj.yaml"
    f.write_text(yaml.safe_dump(pj))
    r = runner.invoke(app, ["describe", "-f", str(f), "-o", "json"])
    assert r.exit_code == 0, r.output
    (gang,) = json.loads(r.stdout)[0]["gangs"]
    assert gang["topology"] == [{"key": BLOCK, "required": False},
                                {"key": RACK, "required": True, "components": ["replica/Worker"]}]
    r = runner.invoke(app, ["describe", "-f", str(f)], env={"COLUMNS": "200"})
    assert f"topology: {BLOCK} preferred; {RACK} required for replica/Worker" in r.stdout
