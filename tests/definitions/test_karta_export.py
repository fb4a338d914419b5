"""`placer catalog export --format karta`: placer's own definitions as Workload Map Kartas.
Judges: the real CRD's schema (../shared/corpus/karta/crd, read in place), and the built-in
definition itself, interpreting the same manifests (examples/ and the upstream corpus)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import jq
import pytest
import yaml

from placer.definitions.catalog import PLACER_FORMAT, load_catalog
from placer.definitions.interpret import interpret
from placer.definitions.karta import karta_problems
from placer.inputs.manifests import read_documents
from placer.ops.catalog import export_kartas, write_exports
from tests.definitions.catalog_helpers import cond
from tests.definitions.karta_helpers import EXAMPLES, ROOT, require_shared, shared_karta

BUILTIN = load_catalog()
DEFINITIONS = sorted({d.name: d for d in BUILTIN.by_gvk.values() if d.format == PLACER_FORMAT}.values(),
                     key=lambda d: d.name)
EXPORTS = export_kartas()


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("kartas")
    write_exports(EXPORTS, str(out))
    return out


@pytest.fixture(scope="module")
def karta_first(exported):
    return load_catalog([exported], prefer="karta")


def manifests() -> list[tuple[str, dict]]:
    paths = [str(EXAMPLES)]
    corpus = shared_karta()
    if corpus is not None:
        paths.append(str(corpus.parent / "upstream"))
    return [(d.where, d.obj) for d in read_documents(paths)]


MANIFESTS = manifests()


def statuses(defn) -> list[dict | None]:
    """No status, and for each condition and phase the definition's rules name, a status with it."""
    out: list[dict | None] = [None, {"conditions": []}]
    text = " ".join(f"{r.condition or ''} {r.when or ''}" for r in defn.definition.status.rules)
    for rule in defn.definition.status.rules:
        if rule.condition:
            out.append({"conditions": [cond(rule.condition, rule.conditionStatus)]})
    for word in ("Running", "Ready", "Failed", "Succeeded", "Completed", "Suspended", "Available"):
        if word in text:
            out.append({"conditions": [cond(word)], "phase": word, "state": word.lower()})
    return out


def test_one_file_per_built_in_type_each_valid_against_the_real_crd(exported):
    import jsonschema
    corpus = require_shared()
    crd = yaml.safe_load((corpus / "crd" / "run.ai_kartas.yaml").read_text())
    schema = next(v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1")["schema"]["openAPIV3Schema"]
    files = sorted(p.name for p in exported.glob("*.yaml"))
    assert files == sorted(f"{d.name}.yaml" for d in DEFINITIONS)
    for path in exported.glob("*.yaml"):
        text = path.read_text()
        assert text.startswith("# Workload Map (Karta) form of placer's definition catalog/")
        for doc in yaml.safe_load_all(text):
            jsonschema.validate(doc, schema)
            assert not isinstance(karta_problems(doc), list), path.name
    assert load_catalog([exported], builtin=False).kinds() == BUILTIN.kinds()


def test_what_karta_cannot_express_is_listed_at_the_top_of_the_file(exported):
    jobset = (exported / "jobset.yaml").read_text().split("apiVersion:")[0]
    assert "podsPerReplica" in jobset and "one podGroup per workload" in jobset
    lws = (exported / "leaderworkerset.yaml").read_text().split("apiVersion:")[0]
    assert "gangPodLabel leaderworkerset.sigs.k8s.io/group-key" in lws
    pod = (exported / "pod.yaml").read_text().split("apiVersion:")[0]
    assert "podGroup" not in pod                      # the Pod definition has no gangs


@pytest.mark.parametrize("defn", DEFINITIONS, ids=lambda d: d.name)
def test_the_export_read_back_gives_the_same_pods_gpus_and_phase(defn, karta_first):
    kinds = {(m.apiVersion, m.kind) for m in defn.definition.matches}
    objs = [(w, o) for w, o in MANIFESTS if (o.get("apiVersion"), o.get("kind")) in kinds]
    assert objs, f"no example of {defn.name}"
    for where, obj in objs:
        assert karta_first.lookup(obj["apiVersion"], obj["kind"]).format == "karta"
        for status in statuses(defn):
            o = {**obj, "status": status} if status is not None else obj
            mine, theirs = interpret(o, BUILTIN), interpret(o, karta_first)
            assert (theirs.pods, theirs.gpus, theirs.phase) == (mine.pods, mine.gpus, mine.phase), (where, status)
            compare_gangs(defn, o, mine, theirs, where)


def compare_gangs(defn, obj, mine, theirs, where) -> None:
    """Equal where Karta can say it. The export's podGroup is one gang of every pod, its
    minimum the subgroups' minimums added (minReplicasPath when > 0, as the library sizes
    gangs): computed here from the exported paths with jq. placer's own gang of the whole
    workload is that gang wherever the export has no minReplicasPath."""
    if not defn.definition.gangs:
        assert theirs.gangs == mine.gangs == (), where
        return
    if not theirs.pods:
        return
    assert [g.pods for g in theirs.gangs] == [theirs.pods], where
    assert theirs.gangs[0].min_member == exported_minimum(exported_karta(obj), obj), where
    # placer's one gang of every pod needing every pod: Karta says the same (a smaller minMember
    # is a rule of placer's gang expression, which the export's header lists as approximated)
    whole = len(mine.gangs) == 1 and mine.gangs[0].pods == mine.gangs[0].min_member == mine.pods
    if whole and not any(c.minReplicas for c in defn.definition.components):
        assert theirs.gangs[0].min_member == mine.gangs[0].min_member, where


def exported_karta(obj: dict) -> dict:
    for f in EXPORTS:
        for doc in yaml.safe_load_all(f.text):
            kind = doc["spec"]["structureDefinition"]["rootComponent"]["kind"]
            if (kind["kind"], kind["version"]) == (obj["kind"], obj["apiVersion"].rpartition("/")[2]) \
                    and kind["group"] == obj["apiVersion"].rpartition("/")[0]:
                return doc
    raise KeyError(obj["kind"])


def exported_minimum(karta: dict, obj: dict) -> int:
    total = 0
    for child in karta["spec"]["structureDefinition"]["childComponents"]:
        scale = child.get("scaleDefinition", {})
        reps = jq.compile(scale.get("replicasPath", "1")).input_value(obj).all()
        lows = jq.compile(scale["minReplicasPath"]).input_value(obj).all() if "minReplicasPath" in scale else []
        highs = jq.compile(scale["maxReplicasPath"]).input_value(obj).all() if "maxReplicasPath" in scale else []
        for k, r in enumerate(reps):
            lo = lows[k] if k < len(lows) else None
            hi = highs[k] if k < len(highs) else None
            pods = min(max(r, lo) if lo is not None else r, hi) if hi is not None else (max(r, lo) if lo is not None else r)
            total += lo if lo is not None and 0 < lo < pods else pods
    return total


def test_stdout_without_a_directory_and_unknown_kinds_exit_2():
    res = subprocess.run([sys.executable, "-m", "placer", "catalog", "export", "--format", "karta", "JobSet",
                          "leaderworkerset.x-k8s.io/LeaderWorkerSet"], capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    assert [d["metadata"]["name"] for d in yaml.safe_load_all(res.stdout)] == ["jobset", "leaderworkerset"]
    res = subprocess.run([sys.executable, "-m", "placer", "catalog", "export", "--format", "karta", "Widget"],
                         capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1 and "Widget" in res.stderr
    res = subprocess.run([sys.executable, "-m", "placer", "catalog", "export", "--format", "kai"],
                         capture_output=True, text=True, cwd=ROOT)
    assert res.returncode == 2 and "--format" in res.stderr
