"""The exported Kartas on a real API server: the kartas.run.ai CRD from ../shared (read in
place) installed on the hub, every file of `placer catalog export --format karta -o DIR`
applied with the real kubectl (strict field validation), and what the server stored (after
its schema validation and pruning) read back as definitions equal to what was exported."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from placer.definitions.catalog import load_definition_file
from tests.definitions.karta_helpers import ROOT, require_shared

pytestmark = pytest.mark.kube


def test_every_exported_karta_is_accepted_and_kept_whole_by_the_real_api_server(real_kube, tmp_path):
    corpus = require_shared()
    real_kube.install_crds("hub", [corpus / "crd" / "run.ai_kartas.yaml"])
    out = tmp_path / "kartas"
    subprocess.run([sys.executable, "-m", "placer", "catalog", "export", "--format", "karta", "-o", str(out)],
                   check=True, cwd=ROOT, capture_output=True)
    files = sorted(out.glob("*.yaml"))
    exported = {d["metadata"]["name"]: d for f in files for d in yaml.safe_load_all(f.read_text())}
    assert len(files) >= 18 and len(exported) >= len(files)
    for f in files:
        real_kube.kubectl("--context", "hub", "apply", "--server-side", "--validate=strict", "-f", str(f))
    listed = real_kube.kubectl("--context", "hub", "get", "kartas", "-o", "json").stdout
    stored = {d["metadata"]["name"]: d for d in json.loads(listed)["items"]}
    assert set(exported) <= set(stored)
    for name, doc in exported.items():
        assert stored[name]["spec"] == doc["spec"], name            # nothing pruned or defaulted away
    # as `kubectl get kartas -o yaml` prints them (a List), they load as definitions again
    (tmp_path / "live.yaml").write_text(real_kube.kubectl("--context", "hub", "get", "kartas", "-o", "yaml").stdout)
    loaded = {d.name for d in load_definition_file(tmp_path / "live.yaml") if d.format == "karta"}
    assert set(exported) <= loaded
    # and the server rejects what the CRD does not have
    bad = {**next(iter(exported.values())), "metadata": {"name": "not-a-karta"}}
    bad["spec"] = {**bad["spec"], "unknownField": 1}
    res = real_kube.kubectl("--context", "hub", "apply", "--server-side", "--validate=strict", "-f", "-",
                            check=False, input=yaml.safe_dump(bad))
    assert res.returncode != 0 and "unknownField" in res.stderr
