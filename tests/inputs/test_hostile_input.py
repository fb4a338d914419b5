"""Hostile and malformed input through the CLI: one line naming the file and field, exit 2,
no traceback, nothing planned. The cases come from a fault campaign's findings; the fuzz
tests at the end generate more with hypothesis."""

from __future__ import annotations

import textwrap

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from placer.cli import app
from placer.model import documents
from placer.model.documents import yaml_input_error

runner = CliRunner()

JOB = textwrap.dedent("""\
    apiVersion: batch/v1
    kind: Job
    metadata: {name: j, namespace: ml}
    spec:
      template:
        spec:
          restartPolicy: Never
          containers:
          - name: c
            image: x
            resources: {limits: {nvidia.com/gpu: GPUS}}
    """)


def job(gpus: str = "4", name: str = "j") -> str:
    return JOB.replace("GPUS", gpus).replace("name: j,", f"name: {name},")


def alias_bomb() -> str:
    levels = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        prev, cur = chr(96 + i), chr(97 + i)
        levels.append(f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * 9) + "]")
    return job() + "  extra:\n" + "".join(f"    {line}\n" for line in levels)


@pytest.fixture(autouse=True)
def _isolated(unconfigured):
    return unconfigured             # see tests/conftest.py


def one_line_exit_2(result, *expected: str) -> str:
    assert result.exit_code == 2, (result.exit_code, result.output)
    line = result.stderr.strip().splitlines()[-1]
    assert "Traceback" not in result.stderr and line.startswith("error: "), result.stderr
    for text in expected:
        assert text in line, line
    return line


MANIFESTS = [
    pytest.param(b'apiVersion: v1\nkind: Pod\nmetadata: {name: "\xff\xfe"}\n',
                 ["line 3: not UTF-8 text (byte 0xff"], id="non-utf8"),
    pytest.param(job("-4").encode(), ["container c: resources nvidia.com/gpu: must not be negative, got -4"],
                 id="negative-gpus"),
    pytest.param(job(".inf").encode(), ["limits[nvidia.com/gpu]: inf is not a finite number"], id="inf"),
    pytest.param(job(".nan").encode(), ["limits[nvidia.com/gpu]: nan is not a finite number"], id="nan"),
    pytest.param(job(name="[a, b]").encode(), ["metadata.name: expected a string, got a list"], id="name-list"),
    pytest.param(job(name="Train_1").encode(), ["metadata.name 'Train_1': must be at most 253"], id="name-invalid"),
    pytest.param(job(name="!!binary aGVsbG8=").encode(), ["metadata.name: binary data (!!binary)"], id="binary"),
    pytest.param(job(name="!!set {a, b}").encode(), ["metadata.name: a set (!!set)"], id="set"),
    pytest.param(job().replace("restartPolicy: Never", "restartPolicy: Never\n      x: " + "[" * 3000 + "]" * 3000)
                 .encode(), ["nested deeper than 100 levels"], id="deep-nesting"),
    pytest.param(alias_bomb().encode(), ["document too large: more than 1,000,000 values"], id="alias-bomb"),
    pytest.param(job().replace("containers:\n      - name: c\n        image: x\n"
                               "        resources: {limits: {nvidia.com/gpu: 4}}", "containers: {}").encode(),
                 ["pod spec.containers: expected a list, got a map"], id="containers-map"),
    pytest.param(job().replace("metadata: {name: j, namespace: ml}", "metadata: {name: j, namespace: ml, 7: x}")
                 .encode(), ["metadata: key 7 is not a string"], id="int-key"),
    pytest.param(job("123456789012345678901234567890").encode(), ["out of range for a 64-bit integer"],
                 id="huge-int"),
]


@pytest.mark.parametrize("content,expected", MANIFESTS)
@pytest.mark.parametrize("command", ["plan", "describe"])
def test_bad_manifest_is_one_line_and_exit_2(tmp_path, command, content, expected):
    path = tmp_path / "bad.yaml"
    path.write_bytes(content)
    result = runner.invoke(app, [command, "-f", str(path)])
    one_line_exit_2(result, "bad.yaml", *expected)


def test_non_utf8_stdin_is_named(tmp_path):
    result = runner.invoke(app, ["plan", "-f", "-"], input=b"kind: Job\nmetadata: {name: \xc3\x28}\n")
    one_line_exit_2(result, "<stdin>: line 2: not UTF-8 text")


def test_nan_and_infinity_in_json_are_refused(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text('{"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": {"x": NaN}}')
    one_line_exit_2(runner.invoke(app, ["describe", "-f", str(path)]), "bad.json", "NaN is not valid JSON")


def test_yaml_timestamps_become_strings_as_kubectl_reads_them(tmp_path):
    path = tmp_path / "ts.yaml"
    path.write_text(job().replace("metadata: {name: j, namespace: ml}",
                                  "metadata: {name: j, namespace: ml, annotations: {at: 2024-05-01T10:00:00Z}}"))
    result = runner.invoke(app, ["describe", "-f", str(path), "-o", "json"])
    assert result.exit_code == 0, result.output


CLUSTERS = [
    pytest.param("clusters:\n- name: a\n  nodes:\n  - {namePrefix: n-, count: 1000000000, allocatable: {cpu: 1}}\n",
                 ["clusters[0].nodes[0].count: Input should be less than or equal to 100000"], id="count"),
    pytest.param("clusters:\n- name: a\n  nodes:\n  - {name: n, allocatable: {nvidia.com/gpu: 1e30}}\n",
                 ["allocatable: nvidia.com/gpu: '1e30' is out of range"], id="huge-gpus"),
    pytest.param("clusters:\n- name: a\n  nodes:\n  - {name: n, allocatable: {nvidia.com/gpu: 8}, used: {cpu: -1}}\n",
                 ["used: cpu: -1 is out of range"], id="negative-used"),
    pytest.param("clusters:\n" + "".join(f"- name: c{i}\n  nodes:\n  - {{namePrefix: n-, count: 100000, "
                                         f"allocatable: {{cpu: 1}}}}\n" for i in range(3)),
                 ["300,000 simulated nodes: at most 200,000"], id="too-many-nodes"),
    pytest.param("clusters: []\n---\nclusters: []\n", ["line 3: a clusters file is one YAML document"], id="two-docs"),
    pytest.param("clusters:\n- name: a\n  nodes: [{name: n, allocatable: {cpu: .nan}}]\n", ["nan is not a finite"],
                 id="nan"),
]


@pytest.mark.parametrize("content,expected", CLUSTERS)
def test_bad_clusters_file_is_one_line_and_exit_2(tmp_path, content, expected):
    (tmp_path / "job.yaml").write_text(job())
    (tmp_path / "c.yaml").write_text(content)
    result = runner.invoke(app, ["plan", "--clusters", str(tmp_path / "c.yaml"), "-f", str(tmp_path / "job.yaml")])
    one_line_exit_2(result, "c.yaml", *expected)


def libyaml_too_deep(line: int) -> yaml.scanner.ScannerError:
    """What the libyaml of PyYAML 6.0.4's wheels raises past 1000 levels (0-based marks)."""
    mark = yaml.error.Mark("<file>", 0, line - 1, 0, None, None)
    return yaml.scanner.ScannerError("while increasing flow level", mark, "exceeded maximum nesting depth", mark)


def test_libyaml_nesting_limit_reads_as_placers_own_depth_guard():
    err = yaml_input_error(libyaml_too_deep(8), "bad.yaml")
    assert (err.message, err.source, err.exit_code) == ("line 8: nested deeper than 100 levels", "bad.yaml", 2)


def test_libyaml_nesting_limit_is_one_line_and_exit_2_with_either_loader(tmp_path, monkeypatch):
    # whether or not this PyYAML has the C loader, or its libyaml a nesting limit: the loader
    # that has one raises its error here, and the user gets placer's line
    class TooDeep(yaml.SafeLoader):
        def __init__(self, text):
            super().__init__(text)
            self.manifest = "too-deep" in text           # the fleet and the catalog read as usual

        def check_node(self):
            if self.manifest:
                raise libyaml_too_deep(8)
            return super().check_node()

    monkeypatch.setattr(documents, "_Loader", TooDeep)
    path = tmp_path / "bad.yaml"
    path.write_text(job(name="too-deep"))
    for command in ("plan", "describe"):
        one_line_exit_2(runner.invoke(app, [command, "-f", str(path)]), "bad.yaml",
                        "line 8: nested deeper than 100 levels")


@pytest.mark.parametrize("flow", [True, False], ids=["flow", "block"])
def test_nesting_past_libyamls_limit_is_placers_line(tmp_path, flow):
    deep = 1500                       # past libyaml's 1000 where it has a limit, past ours always
    nested = ("[" * deep + "]" * deep) if flow else "".join("  " * i + "-\n" for i in range(deep)) + "  " * deep + "x"
    path = tmp_path / "bad.yaml"
    path.write_text(job() + "---\nx: " + ("" if flow else "\n") + nested + "\n")
    one_line_exit_2(runner.invoke(app, ["plan", "-f", str(path)]), "bad.yaml", "nested deeper than 100 levels")


# --- fuzzing: whatever the bytes, an answer or one line, never a traceback ---------------

VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12)
POD_FIELDS = ["containers", "initContainers", "nodeSelector", "tolerations", "affinity", "overhead",
              "priorityClassName", "restartPolicy"]


def _mutated(field: str, value) -> str:
    obj = yaml.safe_load(job())
    obj["spec"]["template"]["spec"][field] = value
    return yaml.safe_dump(obj)


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(field=st.sampled_from(POD_FIELDS), value=VALUES)
def test_fuzz_pod_fields(tmp_path_factory, field, value):
    path = tmp_path_factory.mktemp("fuzz") / "m.yaml"
    path.write_text(_mutated(field, value))
    for command in ("describe", "plan"):
        result = runner.invoke(app, [command, "-f", str(path)])
        assert result.exit_code in (0, 2, 3), (command, result.output, result.exception)
        assert "Traceback" not in result.output and not isinstance(result.exception, (TypeError, KeyError,
                                                                                       AttributeError, ValueError))


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(data=st.binary(max_size=200) | st.text(max_size=200).map(str.encode))
def test_fuzz_raw_bytes(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("fuzz") / "m.yaml"
    path.write_bytes(b"apiVersion: batch/v1\nkind: Job\n" + data)
    for args in (["describe", "-f", str(path)], ["plan", "-f", str(path)],
                 ["plan", "--clusters", str(path), "-f", str(path)]):
        result = runner.invoke(app, args)
        assert result.exit_code in (0, 2, 3), (args, result.output, result.exception)
        assert "Traceback" not in result.output


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(group=st.dictionaries(st.sampled_from(["name", "namePrefix", "count", "allocatable", "used", "labels",
                                              "taints", "unschedulable"]), VALUES, max_size=6))
def test_fuzz_clusters_file(tmp_path_factory, group):
    d = tmp_path_factory.mktemp("fuzz")
    (d / "job.yaml").write_text(job())
    (d / "c.yaml").write_text(yaml.safe_dump({"clusters": [{"name": "a", "nodes": [group]}]}))
    result = runner.invoke(app, ["plan", "--clusters", str(d / "c.yaml"), "-f", str(d / "job.yaml")])
    assert result.exit_code in (0, 2, 3), (result.output, result.exception)
    assert "Traceback" not in result.output


# --- options: NaN, infinities and negatives are named, not read as 'no limit' ------------

@pytest.mark.parametrize("args,expected", [
    (["--time-limit", "nan"], "--time-limit nan: must be a finite number, positive"),
    (["--time-limit", "inf"], "--time-limit inf: must be a finite number, positive"),
    (["--effort", "nan"], "--effort nan: must be a finite number, positive"),
    (["--workers", "-1"], "--workers -1: must be a finite number, at least 1"),
    (["--gpu-resource", ""], "--gpu-resource '': expected a resource name"),
    (["--gpu-resource", "nvidia.com/gpu with space"], "expected a resource name"),
])
def test_bad_plan_options(tmp_path, args, expected):
    (tmp_path / "job.yaml").write_text(job())
    one_line_exit_2(runner.invoke(app, ["plan", "-f", str(tmp_path / "job.yaml"), *args]), expected)


@pytest.mark.parametrize("args,expected", [
    (["--time-limit", "-1"], "--time-limit -1.0: must be a finite number, positive"),
    (["--time-limit", "nan"], "--time-limit nan"),
    (["--batch-window", "nan"], "--batch-window nan: must be a finite number, at least 0"),
    (["--request-deadline", "soon"], "--request-deadline 'soon': expected a duration"),
    (["--request-deadline", "0"], "--request-deadline 0: must be positive"),
    (["--request-deadline", "20s"], "--request-deadline 20s: a target write's connect and answer (twice the "
                                    "deadline) must end inside the lease (10.5s after a renewal with this lease "
                                    "timing): at most 5.25s"),
    (["--preemption", "always"], "--preemption 'always': expected one of off, within-quota, reclaim, priority"),
    (["--preemption-rate", "0"], "--preemption-rate 0: must be a whole number of preemptions per minute, at least 1"),
    (["--min-run-time", "soon"], "--min-run-time 'soon': expected a duration"),
])
def test_bad_daemon_options(args, expected):
    one_line_exit_2(runner.invoke(app, ["daemon", *args]), expected)


def test_daemon_on_a_busy_metrics_port_is_an_input_error_before_any_watch(tmp_path):
    import socket

    from placer.daemon import Daemon
    from placer.model.errors import InputError

    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    try:
        daemon = Daemon.__new__(Daemon)      # no cluster needed: the port is checked first
        daemon.metrics, daemon.healthy = None, lambda: True

        def no_watches():
            raise AssertionError("watches started before the metrics port was bound")
        daemon.start_watches = no_watches
        port = busy.getsockname()[1]
        with pytest.raises(InputError, match=f"--metrics-addr 127.0.0.1:{port}: cannot listen"):
            daemon.start(metrics_addr=f"127.0.0.1:{port}")
    finally:
        busy.close()


# --- kubeconfig: missing, broken, or a context asked of none ---------------------------------

def test_context_asked_without_any_kubeconfig_is_an_error_not_the_example_fleet(tmp_path):
    (tmp_path / "job.yaml").write_text(job())
    result = runner.invoke(app, ["plan", "-f", str(tmp_path / "job.yaml"), "--context", "prod"])
    one_line_exit_2(result, "--context prod: there is no kubeconfig")


@pytest.mark.parametrize("content,expected", [
    ("garbage: [\n", "cannot read kubeconfig: while parsing a flow node"),
    (None, "cannot read kubeconfig"),
])
def test_broken_or_missing_kubeconfig_is_one_line_and_exit_2(tmp_path, content, expected):
    (tmp_path / "job.yaml").write_text(job())
    kubeconfig = tmp_path / "kc"
    if content is not None:
        kubeconfig.write_text(content)
    result = runner.invoke(app, ["plan", "-f", str(tmp_path / "job.yaml"), "--kubeconfig", str(kubeconfig)])
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    one_line_exit_2(result, "kc: " + expected)
