"""Real CRDs on a real apiserver: each upstream CRD in ../shared/corpus/upstream installed on the hub,
an upstream example of that kind created there (the real server validates, defaults and prunes it),
and `placer describe KIND/NAME` of the stored object must agree with `placer describe -f` of the file.
Also `placer catalog apply` into placer's own CRD: the real server's pruning keeps every definition whole."""
from __future__ import annotations

import json

import pytest
import yaml
from typer.testing import CliRunner

from placer.cli import app
from placer.definitions.catalog import load_catalog
from placer.definitions.describe import workload_json
from placer.definitions.interpret import interpret
from placer.fleetview.registry import API_VERSION, CRD_NAME, KIND, builtin_definition_files
from placer.model.errors import Invalid, ServerError
from placer.ops.describe import describe_live
from tests.kubeenv import corpus_crds, upstream_crds

pytestmark = pytest.mark.kube

CRDS = upstream_crds()
CATALOG = load_catalog()
COMPARED = ("kind", "name", "pods", "gpus", "resources", "components", "gangs")


@pytest.fixture(scope="module")
def hub(real_kube):
    """The hub with every upstream CRD installed (once; the hub is not wiped between tests): those of
    the operators kube-env builds from their pinned modules (tests.kubeenv.MODULE_CRDS)."""
    files = [f for paths in CRDS.values() for f in paths]
    real_kube.install_crds("hub", corpus_crds(files))
    return real_kube


def crd_kinds(paths) -> set[tuple[str, str]]:
    out = set()
    for doc in corpus_crds(paths):
        spec = doc["spec"]
        out |= {(f"{spec['group']}/{v['name']}", spec["names"]["kind"]) for v in spec["versions"] if v["served"]}
    return out


def examples(kind_dir: str):
    """(file, document) of every upstream example whose kind the directory's CRDs serve and the catalog knows."""
    kinds = crd_kinds(CRDS[kind_dir])
    catalog = CATALOG
    for path in sorted(CRDS[kind_dir][0].parent.glob("*.yaml")):
        if path.name.startswith("crd"):
            continue
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and (doc.get("apiVersion"), doc.get("kind")) in kinds and catalog.lookup(doc["apiVersion"], doc["kind"]) is not None:
                yield path, doc


def describe(*args) -> list[dict] | dict:
    res = CliRunner().invoke(app, ["describe", *args, "-o", "json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@pytest.mark.skipif(not CRDS, reason="no upstream corpus (../shared/corpus/upstream) beside this checkout")
@pytest.mark.parametrize("kind_dir", sorted(CRDS))
def test_live_describe_of_upstream_examples_through_the_real_crd(hub, kind_dir, tmp_path):
    found = list(examples(kind_dir))
    assert found, f"no example of {kind_dir}'s CRD kinds that the catalog interprets"
    c = hub.client("hub")
    ns = hub.namespace("hub", hub.unique(f"crd-{kind_dir}"))
    accepted, rejected = 0, []
    for i, (path, doc) in enumerate(found):
        base = doc["metadata"].get("name") or doc["metadata"]["generateName"].rstrip("-")
        doc = {**doc, "metadata": {**doc["metadata"], "namespace": ns, "name": f"{base}-{i}"}}
        doc["metadata"].pop("generateName", None)
        try:
            stored = c.apply(doc, force=True)                   # validated, defaulted, pruned by the server
        except Invalid as e:        # an upstream example its own CRD rejects: not placer's to describe
            rejected.append(f"{path.name}: {e}")
            continue
        except ServerError as e:    # server-side apply's word for a field the pinned CRD does not know
            if "field not declared in schema" not in str(e):   # (a newer example: JobSet's schedulingGroup)
                raise
            rejected.append(f"{path.name}: {e}")
            continue
        accepted += 1
        assert stored["metadata"]["uid"]
        ref = f"{doc['kind']}.{doc['apiVersion'].split('/')[0]}/{doc['metadata']['name']}"
        offline = workload_json(interpret(doc, CATALOG))
        if accepted == 1:               # the first through the CLI, file against cluster
            local = tmp_path / f"{i}.yaml"
            local.write_text(yaml.safe_dump(doc))
            (from_file,) = describe("-f", str(local))
            live = describe(ref, "-n", ns, "--context", "hub", "--kubeconfig", str(hub.kubeconfig))
            live = live[0] if isinstance(live, list) else live
            assert {k: from_file[k] for k in COMPARED} == {k: offline[k] for k in COMPARED}
        else:
            w, pods = describe_live(ref, ns, "hub", None, CATALOG, kube=hub.kube, warn=lambda _: None)
            live = workload_json(w, pods)
        for key in COMPARED:
            assert live.get(key) == offline.get(key), (path.name, key, live.get(key), offline.get(key))
        assert live["podsByComponent"] is not None
    assert accepted, f"the real apiserver rejected every {kind_dir} example: {rejected}"


def test_catalog_apply_into_the_real_placer_crd(real_kube):
    kc = str(real_kube.kubeconfig)
    res = CliRunner().invoke(app, ["catalog", "apply", "--context", "west", "--kubeconfig", kc])
    assert res.exit_code == 0, res.output
    c = real_kube.client("west")
    crd = c.get("customresourcedefinitions", CRD_NAME)
    assert crd["spec"]["group"] == "placer.dev"
    stored = {o["metadata"]["name"]: o for o in c.list(c.resource_for(API_VERSION, KIND)).items}
    files = {yaml.safe_load(p.read_text())["name"]: yaml.safe_load(p.read_text()) for p in builtin_definition_files()}
    assert set(stored) == set(files)
    for name, definition in files.items():                      # nothing pruned, nothing defaulted away
        assert stored[name]["spec"] == json.loads(json.dumps(definition)), name
    # kubectl of the same release sees them through the CRD's printer columns
    out = real_kube.kubectl("--context", "west", "get", "wldef", "jobset").stdout
    assert "JobSet" in out
    # idempotent: again, nothing changes on the server
    versions = {n: o["metadata"]["resourceVersion"] for n, o in stored.items()}
    res = CliRunner().invoke(app, ["catalog", "apply", "--context", "west", "--kubeconfig", kc])
    assert res.exit_code == 0, res.output
    again = {o["metadata"]["name"]: o["metadata"]["resourceVersion"]
             for o in c.list(c.resource_for(API_VERSION, KIND)).items}
    assert again == versions
