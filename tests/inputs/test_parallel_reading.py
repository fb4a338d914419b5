"""Reading on two cores (placer.inputs.parallel, issue 24): the groups are the serial ones; a
child that dies, raises or hangs has its part read by the parent; a bad file in either part
gives the serial run's error; small inputs and stdin stay serial. The forking runs are probed
in fresh interpreters (no thread of the test runner's may stop the fork)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from placer.inputs import parallel as PAR
from placer.model.forked import SERIAL_ENV

ROOT = Path(__file__).resolve().parents[2]
KINDS = ("Job", "Deployment", "StatefulSet", "Pod")


def _doc(i: int) -> str:
    kind = KINDS[i % len(KINDS)]
    pod = {"containers": [{"name": "main", "image": "x", "resources": {
        "limits": {"nvidia.com/gpu": 1 + i % 4}, "requests": {"cpu": str(1 + i % 3), "memory": "8Gi"}}}]}
    labels = {"app": f"a{i}"}
    template = {"metadata": {"labels": labels}, "spec": pod}
    spec = {"Job": {"parallelism": 1 + i % 2, "template": {"spec": {**pod, "restartPolicy": "Never"}}},
            "Deployment": {"replicas": 1 + i % 3, "selector": {"matchLabels": labels}, "template": template},
            "StatefulSet": {"replicas": 2, "serviceName": f"s{i}", "selector": {"matchLabels": labels},
                            "template": template},
            "Pod": pod}[kind]
    obj = {"apiVersion": {"Job": "batch/v1", "Pod": "v1"}.get(kind, "apps/v1"), "kind": kind,
           "metadata": {"name": f"w{i:04d}", "namespace": "ml"}, "spec": spec}
    pad = "# " + "x" * 300 + "\n"                     # bulk, so that a few hundred files pass MIN_BYTES
    return pad * 3 + yaml.safe_dump(obj, sort_keys=False)


@pytest.fixture(scope="module")
def many(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("many")
    for i in range(300):
        (d / f"w{i:04d}.yaml").write_text(_doc(i))
    assert sum(f.stat().st_size for f in d.iterdir()) >= PAR.MIN_BYTES
    return d


PROBE = """
    import os, pickle, signal, sys, time
    from placer.definitions.catalog import load_catalog
    from placer.inputs import manifests as M, parallel as PAR
    files, how = sys.argv[1], sys.argv[2]
    parent = os.getpid()
    real = PAR.classify
    def classify(docs, *a, **k):
        if os.getpid() != parent:                   # in the child
            if how == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            if how == "raise":
                raise RuntimeError("boom")
            if how == "hang":
                time.sleep(60)
        return real(docs, *a, **k)
    PAR.classify = classify
    PAR.TIMEOUT_FLOOR, PAR.TIMEOUT_FACTOR = 1.0, 0.0
    catalog = load_catalog()
    reading = PAR.Reading()
    t = time.monotonic()
    idle = []
    got = PAR.load_groups([files], catalog, reading=reading, idle=lambda: idle.append(1))
    took = time.monotonic() - t
    want = M.load_groups([files], catalog)
    print(got == want, len(got), reading.wait is not None, took < 20, "idle" if idle else "busy")
"""


@pytest.mark.parametrize("how", ["ok", "kill", "raise", "hang"])
def test_the_groups_are_the_serial_ones_whatever_the_child_does(many, how):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env[SERIAL_ENV] = "0"                       # fork even on a busy machine
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(PROBE), str(many), how], capture_output=True,
                          text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[:4] == ["True", "300", "True", "True"]
    if how == "hang":                                  # the parent had time for other work
        assert done.stdout.split()[4] == "idle"
    assert "Traceback" not in done.stderr


def test_the_cut_gives_the_child_the_later_files(many):
    files = sorted(str(f) for f in many.iterdir())
    cut = PAR._cut(files)
    assert 0 < cut < len(files)
    assert abs(cut - len(files) * (1 - PAR.CHILD_SHARE)) <= 2      # files of about one size


def test_small_inputs_and_stdin_stay_serial(many):
    files = sorted(str(f) for f in many.iterdir())
    assert PAR._cut(files[:20]) == 0                  # below MIN_BYTES
    assert PAR._cut(files + ["-"]) == 0
    assert PAR._cut(files + [str(many / "missing.yaml")]) == 0


def test_examples_stay_serial():
    files = [str(p) for p in sorted((ROOT / "examples").rglob("*.yaml"))]
    assert files and PAR._cut(files) == 0


COMPILES = """
    import os, sys
    from placer.definitions import catalog as C
    from placer.inputs import parallel as PAR
    files, out = sys.argv[1], sys.argv[2]
    parent, compiled = os.getpid(), []
    real_compile, real_classify = C.compile_program, PAR.classify
    def compile_program(text, name):
        compiled.append(name)
        return real_compile(text, name)
    def classify(docs, *a, **k):
        before = len(compiled)                      # in the child: the parent's, inherited
        got = real_classify(docs, *a, **k)
        if os.getpid() != parent:                   # the child's own compiles, told through a file
            with open(out, "w") as f:
                f.write(" ".join(compiled[before:]))
        return got
    C.compile_program, PAR.classify = compile_program, classify
    PAR.load_groups([files], C.load_catalog())
    print(" ".join(sorted(compiled)))
"""


def test_the_child_inherits_the_programs_of_its_kinds(many, tmp_path):
    """The programs of the kinds the child's files name are compiled before the fork (issue 24:
    the child compiled them a second time, ~0.1 s of its part): none is compiled in the child,
    and the parent compiles only what the files name."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), SERIAL_ENV: "0"}
    out = tmp_path / "child"
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(COMPILES), str(many), str(out)],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert out.read_text() == ""                     # the child ran and compiled nothing
    assert done.stdout.split() == ["deployment", "job", "pod", "statefulset"]


def test_compiling_ahead_takes_the_kinds_named_in_yaml_and_json(tmp_path):
    from dataclasses import replace

    from placer.definitions.catalog import Catalog, load_catalog

    built = load_catalog()          # its definitions are the process's: others may have compiled some
    fresh = {id(d): replace(d, _program=None) for d in built.by_gvk.values()}
    catalog = Catalog({k: fresh[id(d)] for k, d in built.by_gvk.items()}, built.companion_kinds)
    (tmp_path / "a.json").write_text('{"apiVersion": "batch/v1", "kind": "Job", "metadata": {}}')
    # a RayJob's kind under another apiVersion than any definition's: nothing for it
    (tmp_path / "b.yaml").write_text("apiVersion: apps/v1\nkind: 'StatefulSet'\n---\napiVersion: x/v9\nkind: RayJob\n")
    PAR._compile_ahead([str(tmp_path / "a.json"), str(tmp_path / "b.yaml")], catalog)
    done = {kind for (_, kind), d in catalog.by_gvk.items() if d._program is not None}
    assert done == {"Job", "StatefulSet"}
    PAR._compile_ahead([str(tmp_path / "missing.yaml")], catalog)      # said by the reading, not here
