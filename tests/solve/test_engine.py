"""The definitions engine on definitions written here, independent of the shipped catalog."""

from __future__ import annotations

import copy
import re
import textwrap
from pathlib import Path

import pytest
import yaml

from placer.definitions.catalog import Catalog, compile_definition, load_catalog
from placer.definitions.interpret import LAST_APPLIED, Interpreter, interpret, patch_pod_templates
from placer.model.errors import DefinitionError, EvaluationError, InputError, PlacerError, UnknownKind
from placer.model.names import ANN_MESSAGE, ANN_PHASE, FINALIZER, PLACED_CLUSTER
from placer.model.podspec import effective_requests
from placer.model.quantity import canonical, format_quantity, parse_quantity
from placer.model.workload import Phase

# --- quantities and pod requests ---------------------------------------------------

@pytest.mark.parametrize("resource,value,expected", [
    ("cpu", "500m", 500), ("cpu", "2", 2000), ("cpu", 0.25, 250), ("cpu", "2e3", 2_000_000),
    ("memory", "1Gi", 2**30), ("memory", "1.5Gi", 3 * 2**29), ("memory", "1G", 10**9),
    ("memory", "128974848", 128974848), ("memory", "129e6", 129_000_000), ("memory", "100Ki", 102400),
    ("nvidia.com/gpu", 8, 8), ("nvidia.com/gpu", "4", 4), ("cpu", "1u", 1), ("memory", "0.5", 1),
])
def test_quantities_parse_exactly(resource, value, expected):
    assert canonical(resource, value) == expected


@pytest.mark.parametrize("bad", ["abc", "1.2.3", "5 Gi", "", "1Qi", True, None, [1]])
def test_bad_quantities_are_input_errors(bad):
    with pytest.raises(InputError, match="invalid quantity"):
        parse_quantity(bad)


def test_format_quantity_round_trips_common_units():
    assert format_quantity("cpu", 500) == "500m"
    assert format_quantity("memory", 2**31) == "2Gi"
    assert format_quantity("nvidia.com/gpu", 8) == "8"


def _c(name, requests=None, limits=None, **extra):
    return {"name": name, "resources": {k: v for k, v in (("requests", requests), ("limits", limits)) if v}, **extra}


def test_effective_requests_take_the_larger_of_app_sum_and_init_max():
    req = effective_requests(
        [_c("a", {"cpu": "1", "memory": "1Gi"}), _c("b", {"cpu": "500m"})],
        [_c("init", {"cpu": "4", "memory": "512Mi"})])
    assert req == {"cpu": 4000, "memory": 2**30}


def test_limits_stand_in_for_missing_requests_and_requests_win():
    req = effective_requests([_c("a", {"cpu": "1"}, {"cpu": "2", "nvidia.com/gpu": 2})])
    assert req == {"cpu": 1000, "nvidia.com/gpu": 2}


def test_a_null_quantity_is_no_request():
    req = effective_requests([_c("a", {"cpu": "1", "nvidia.com/gpu": None}, {"nvidia.com/gpu": 2, "memory": None})])
    assert req == {"cpu": 1000, "nvidia.com/gpu": 2}


def test_sidecars_run_beside_app_containers_and_overhead_adds():
    req = effective_requests(
        [_c("app", {"cpu": "1"})],
        [_c("sidecar", {"cpu": "250m"}, restartPolicy="Always"), _c("init", {"cpu": "2"})],
        overhead={"cpu": "100m"})
    # app + sidecar = 1.25; init runs beside the sidecar started before it: 2.25; + overhead
    assert req == {"cpu": 2350}


# --- schema validation -------------------------------------------------------------

BASE = {"name": "thing", "matches": [{"apiVersion": "example.com/v1", "kind": "Thing"}],
        "components": [{"name": "main", "pod": {"template": ".spec.template"}}]}


def _def(**changes):
    d = yaml.safe_load(yaml.safe_dump(BASE))
    d.update(changes)
    return d


@pytest.mark.parametrize("doc,message", [
    (_def(compnents=[]), "compnents: Extra inputs are not permitted"),
    (_def(components=[{"name": "main", "pod": {"template": ".spec.template"}, "replica": "1"}]),
     "components[0].replica: Extra inputs are not permitted"),
    (_def(components=[{"name": "main", "pod": {"template": ".spec.template |"}}]),
     "components[0].pod.template: jq does not compile '.spec.template |'"),
    (_def(components=[{"name": "main", "pod": {}}]), "components[0].pod: Value error, give one of template"
     if False else "give one of template, spec, fields"),
    (_def(components=[{"name": "a", "pod": {"spec": ".x"}}, {"name": "a", "pod": {"spec": ".y"}}]),
     "duplicate component names: a"),
    (_def(status={"rules": [{"phase": "Done", "when": "true"}]}), "status.rules[0].phase"),
    (_def(status={"rules": [{"phase": "Running"}]}), "give exactly one of when, condition"),
    (_def(gangs="[$nope]"), "gangs: jq does not compile"),
    # $conds is only defined for status rules
    (_def(components=[{"name": "main", "pod": {"template": ".spec.template"}, "replicas": "$conds.x.n"}]),
     "components[0].replicas: jq does not compile"),
    (_def(matches=[]), "matches"),
])
def test_schema_errors_name_the_field(doc, message):
    with pytest.raises(DefinitionError) as e:
        compile_definition(doc, "defs/thing.yaml")
    assert str(e.value).startswith("defs/thing.yaml: ")
    assert message in str(e.value)


# --- interpretation ----------------------------------------------------------------

TRAINER = yaml.safe_load(textwrap.dedent("""
    name: trainer
    matches: [{apiVersion: example.com/v1, kind: Trainer}]
    suspend: {path: .spec.suspend}
    components:
    - name: role
      instances: .spec.roles[]            # a map: one instance per key
      pod: {template: .template}
      replicas: .replicas // 1
      minReplicas: .min
      maxReplicas: .max
      podsPerReplica: .hosts // 1
      podSelector: '{"example.com/job": $root.metadata.name, "example.com/role": ($key | ascii_downcase)}'
    - name: server
      instances: .spec.server | select(. != null)
      pod:
        fields:
          resources: '{limits: {(.gpuType // "nvidia.com/gpu"): .gpus}}'
          nodeSelector: .nodeSelector
          labels: {read: '.labels // {}', write: .labels}
    status:
      rules:
      - {phase: Failed, condition: Failed}
      - {phase: Completed, condition: Succeeded}
      - {phase: Running, condition: Running}
      - phase: Initializing
        when: .status.state == "starting"
        reason: '"Starting"'
        message: '"\\(.status.ready // 0) ready"'
    gangs: '[{name: $root.metadata.name, members: [$instances[] | select(.component == "role") | {component, instance}],
              minMember: ($root.spec.minAvailable // null)}]'
"""))


def trainer(**spec):
    return {"apiVersion": "example.com/v1", "kind": "Trainer", "metadata": {"name": "t1", "namespace": "ml"},
            "spec": {"roles": {"Master": {"template": {"spec": {"containers": [_c("m", {"cpu": "1"})]}}},
                               "Worker": {"replicas": 5, "min": 1, "max": 3, "hosts": 2,
                                          "template": {"spec": {"containers": [_c("w", None, {"nvidia.com/gpu": 4})]}}}},
                     **spec}}


@pytest.fixture(scope="module")
def cat() -> Catalog:
    return Catalog({}, frozenset({"ConfigMap"})).with_definitions([compile_definition(TRAINER, "trainer.yaml")])


def test_map_instances_counts_clamp_and_selectors(cat):
    w = interpret(trainer(), cat)
    master, worker = w.instances
    assert (master.instance, master.pods, master.gpus) == ("Master", 1, 0)
    assert (worker.instance, worker.replicas, worker.pods_per_replica, worker.pods) == ("Worker", 3, 2, 6)
    assert worker.gpus_per_pod == 4 and w.gpus == 24 and w.pods == 7
    assert worker.selector == {"example.com/job": "t1", "example.com/role": "worker"}
    assert w.resources == {"cpu": 1000, "nvidia.com/gpu": 24}


def test_fragmented_fields_map_vendor_resources(cat):
    w = interpret(trainer(server={"gpus": 2, "gpuType": "amd.com/gpu", "nodeSelector": {"gpu": "mi300"}}),
                  cat, gpu_resources=("nvidia.com/gpu", "amd.com/gpu"))
    server = w.instances_of("server")[0]
    assert server.pod.requests == {"amd.com/gpu": 2}
    assert server.gpus == 2 and server.pod.node_selector == {"gpu": "mi300"}
    assert interpret(trainer(server={"gpus": 2, "gpuType": "amd.com/gpu"}), cat).instances_of("server")[0].gpus == 0


def test_gangs_default_min_member_to_their_pods(cat):
    (gang,) = interpret(trainer(), cat).gangs
    assert (gang.name, gang.pods, gang.min_member, gang.gpus) == ("t1", 7, 7, 24)
    (gang,) = interpret(trainer(minAvailable=4), cat).gangs
    assert gang.min_member == 4


def _with_gangs(expr: str) -> Catalog:
    doc = yaml.safe_load(yaml.safe_dump(TRAINER))
    doc["gangs"] = expr
    return Catalog({}, frozenset()).with_definitions([compile_definition(doc, "t.yaml")])


def test_a_gang_entry_with_names_stands_for_one_gang_per_name():
    c = _with_gangs('[{names: ["a-0", "a-1", "a-2"], members: [{component: "role", instance: "Worker", pods: 2}],'
                    ' minMember: 1}, {name: "b", members: [{component: "role", instance: "Master"}]}]')
    gangs = interpret(trainer(), c).gangs
    assert [(g.name, g.pods, g.min_member, g.gpus) for g in gangs] == [
        ("a-0", 2, 1, 8), ("a-1", 2, 1, 8), ("a-2", 2, 1, 8), ("b", 1, 1, 0)]
    assert gangs[0].members == (("role", "Worker", 2),)
    assert interpret(trainer(), _with_gangs('[{names: [], members: []}]')).gangs == ()


@pytest.mark.parametrize("spec,why", [
    ({"roles": {"Worker": {"replicas": 2**31, "template": {}}}},
     r"components\[0\].replicas: .*expected a non-negative integer up to 2147483647 \(an int32\), got 2147483648"),
    ({"roles": {"Worker": {"replicas": 10**20, "template": {}}}}, r"got 100000000000000000000"),
    ({"roles": {"Worker": {"replicas": 2**16, "max": 2**16, "hosts": 2**16, "template": {}}}},
     r"role/Worker: 65536 replicas x 65536 pods each is more than 2147483647 pods"),
])
def test_counts_beyond_what_kubernetes_and_the_solver_hold_are_named(cat, spec, why):
    obj = trainer()
    obj["spec"] = spec
    with pytest.raises(PlacerError, match=why):
        interpret(obj, cat)


def test_a_name_pattern_stands_for_every_combination_of_its_indexes():
    c = _with_gangs('[{namePattern: ["T1-", 2, "-Dec-", 3], lowercase: true, members: [], minMember: 0},'
                    ' {namePattern: ["none-", 0, "-x"], members: []}, {namePattern: ["Only"], members: []}]')
    assert [g.name for g in interpret(trainer(), c).gangs] == [
        "t1-0-dec-0", "t1-0-dec-1", "t1-0-dec-2", "t1-1-dec-0", "t1-1-dec-1", "t1-1-dec-2", "Only"]
    # as jq's ascii_downcase: only ASCII letters change
    c = _with_gangs('[{namePattern: ["ÄB"], lowercase: true, members: []}]')
    assert [g.name for g in interpret(trainer(), c).gangs] == ["Äb"]


@pytest.mark.parametrize("expr,why", [
    ('[{name: "a", names: ["b"], members: []}]', "give one of name, names, namePattern, not name and names"),
    ('[{members: []}]', "give one of name, names, namePattern"),
    ('[{names: "a", members: []}]', "names must be a list"),
    ('[{namePattern: "a", members: []}]', "namePattern must be a list of strings and counts"),
    ('[{namePattern: ["a", -1], members: []}]', "namePattern part -1 is neither a string nor a count"),
    ('[{namePattern: ["a", true], members: []}]', "namePattern part True is neither a string nor a count"),
    ('[{namePattern: ["a", 1000, "-", 1000], members: []}]', "namePattern makes more than 100000 gangs"),
    ('[range(0; 2) | {namePattern: ["a\\(.)-", 60000], members: []}]', "more than 100000 gangs"),
    ('[{name: "a", members: [{component: "role", instance: "Nope"}]}]', "KeyError 'role/Nope'"),
    ('{name: "a"}', "expected a list of gangs"),
])
def test_malformed_gangs_are_named(expr, why):
    with pytest.raises(EvaluationError, match=r"gangs: .*" + re.escape(why)):
        interpret(trainer(), _with_gangs(expr))


@pytest.mark.parametrize("change,why", [
    ({"gangs": "empty"}, r"gangs: expression 'empty' failed: produced 0 values, expected one"),
    ({"gangs": "([], [])"}, r"gangs: expression '\(\[\], \[\]\)' failed: produced 2 values, expected one"),
    ({"let": {"nothing": "empty"}}, r"let.nothing: expression 'empty' failed: produced no value"),
    ({"status": {"rules": [{"phase": "Running", "when": "true", "reason": '("a", "b")'}]}},
     r"status.rules\[0\].reason: expression '\(\"a\", \"b\"\)' failed: produced 2 values, expected one"),
])
def test_expressions_yielding_no_value_or_several_are_named(change, why):
    """jq `empty` or a comma where one value belongs: named, never a StopIteration."""
    doc = yaml.safe_load(yaml.safe_dump(TRAINER))
    doc.update(change)
    c = Catalog({}, frozenset()).with_definitions([compile_definition(doc, "t.yaml")])
    with pytest.raises(EvaluationError, match=why):
        interpret(trainer(), c)


@pytest.mark.parametrize("status,phase,reason", [
    (None, Phase.PENDING, "NotStarted"),
    ({"conditions": [{"type": "Running", "status": "True", "reason": "JobRunning"}]}, Phase.RUNNING, "JobRunning"),
    # the last condition of a type counts (training operators append)
    ({"conditions": [{"type": "Running", "status": "True"}, {"type": "Running", "status": "False"},
                     {"type": "Succeeded", "status": "True", "reason": "Done"}]}, Phase.COMPLETED, "Done"),
    ({"conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimit"}]}, Phase.FAILED, "BackoffLimit"),
    ({"state": "starting", "ready": 2}, Phase.INITIALIZING, "Starting"),
    ({"state": "weird"}, Phase.UNKNOWN, ""),
])
def test_status_rules(cat, status, phase, reason):
    obj = trainer()
    if status is not None:
        obj["status"] = status
    w = interpret(obj, cat)
    assert (w.phase, w.reason) == (phase, reason)
    if phase is Phase.INITIALIZING:
        assert w.message == "2 ready"


def test_status_expressions_see_the_last_condition_of_each_type_as_conds():
    doc = yaml.safe_load(yaml.safe_dump(TRAINER))
    doc["status"] = {"rules": [{"phase": "Running", "when": '$conds.Ready.status == "True"',
                                "reason": '$conds.Ready.reason', "message": '"\\($conds | length) types"'}]}
    c = Catalog({}, frozenset()).with_definitions([compile_definition(doc, "t.yaml")])
    obj = trainer()
    obj["status"] = {"conditions": [{"type": "Ready", "status": "False", "reason": "Old"}, "not a condition",
                                    {"type": "Ready", "status": "True", "reason": "Up"}, {"type": "Other"}]}
    w = interpret(obj, c)
    assert (w.phase, w.reason, w.message) == (Phase.RUNNING, "Up", "2 types")
    doc["status"]["rules"][0]["when"] = '$conds.Ready.status | test(1)'
    c = Catalog({}, frozenset()).with_definitions([compile_definition(doc, "t.yaml")])
    with pytest.raises(EvaluationError, match=r"status.rules\[0\].when: expression '\$conds.Ready.status"):
        interpret(obj, c)


def test_an_interpreter_remembers_unchanged_objects_for_two_sweeps(cat):
    remember = Interpreter(cat)
    obj = trainer()
    obj["metadata"]["annotations"] = {"note": "x"}
    first = remember(obj, "a")
    again = copy.deepcopy(obj)
    again["metadata"]["annotations"][LAST_APPLIED] = "{}"                      # jq does not see it
    again["metadata"]["managedFields"] = [{"manager": "kubectl"}]
    hit = remember(again, "b")
    assert hit.instances is first.instances and (remember.hits, remember.misses) == (1, 1)
    assert (hit.source, hit.obj, hit.annotations) == ("b", again, {"note": "x", LAST_APPLIED: "{}"})
    assert hit == interpret(again, cat, source="b")                            # what interpret says
    changed = copy.deepcopy(obj)
    changed["spec"]["roles"]["Master"]["replicas"] = 2
    assert remember(changed).instances_of("role")[0].pods == 2 and remember.misses == 2
    remember.sweep()
    assert remember(obj).instances is first.instances                         # used since: kept
    remember.sweep()
    remember.sweep()
    assert remember(changed).instances_of("role")[0].pods == 2 and remember.misses == 3   # forgotten


def test_an_interpreter_remembers_a_staging_object_through_placers_own_writes(cat):
    """The daemon's finalizer and its report (where, phase, message; the placed-cluster label)
    change the staging object's version, not its workload: read once, not three times. What
    the user wrote (another annotation, a label, the spec) is read again."""
    remember = Interpreter(cat)
    obj = trainer()
    obj["metadata"].update(resourceVersion="1", annotations={})
    first = remember(obj, "a")
    placed = copy.deepcopy(obj)
    placed["metadata"].update(resourceVersion="3", finalizers=[FINALIZER],
                              labels={PLACED_CLUSTER: "east"},
                              annotations={PLACED_CLUSTER: "east", ANN_PHASE: "Pending", ANN_MESSAGE: "placed"})
    hit = remember(placed, "b")
    assert hit.instances is first.instances and (remember.hits, remember.misses) == (1, 1)
    assert (hit.labels, hit.annotations, hit.obj) == ({PLACED_CLUSTER: "east"}, placed["metadata"]["annotations"],
                                                      placed)
    assert hit == interpret(placed, cat, source="b")                           # what interpret says
    for key, value in (("labels", {"team": "a"}), ("annotations", {"note": "x"})):
        edited = copy.deepcopy(placed)
        edited["metadata"][key] = {**edited["metadata"][key], **value}
        assert remember(edited) == interpret(edited, cat)
    assert remember.misses == 3


def test_suspend_is_read_through_its_path(cat):
    assert interpret(trainer(suspend=True), cat).suspended is True
    assert interpret(trainer(), cat).suspended is False


def test_an_expression_failing_on_an_object_names_definition_field_and_expression(cat):
    obj = trainer()
    obj["spec"]["roles"]["Worker"]["min"] = "two"
    with pytest.raises(EvaluationError) as e:
        interpret(obj, cat, source="job.yaml:1")
    # the clamp compares "two" with a number only after evaluation; the count check names it
    assert "definition trainer" in str(e.value) and "minReplicas" in str(e.value)
    obj = trainer()
    obj["spec"]["roles"] = ["not", "a", "map of roles"]
    with pytest.raises(EvaluationError) as e:
        interpret(obj, cat, source="job.yaml:1")
    assert str(e.value).startswith("job.yaml:1: Trainer ml/t1: definition trainer: components[0].")


def test_a_bad_quantity_names_the_instance(cat):
    obj = trainer()
    obj["spec"]["roles"]["Master"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "lots"
    with pytest.raises(InputError, match=r"role/Master: invalid quantity 'lots'"):
        interpret(obj, cat)


def test_unknown_kind(cat):
    with pytest.raises(UnknownKind, match="no workload definition for example.com/v1/Other"):
        interpret({"apiVersion": "example.com/v1", "kind": "Other", "metadata": {"name": "x"}}, cat)


# --- mutation ----------------------------------------------------------------------

PATCH = {"labels": {"kai.scheduler/queue": "research"}, "annotations": {"a": "b"},
         "nodeSelector": {"pool": "gpu"}, "schedulerName": "kai-scheduler",
         "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}


def test_patch_reaches_every_template_and_nothing_else(cat):
    obj = trainer()
    patched = patch_pod_templates(obj, cat, {k: v for k, v in PATCH.items() if k != "annotations"} | {})
    for role in ("Master", "Worker"):
        tpl = patched["spec"]["roles"][role]["template"]
        assert tpl["metadata"]["labels"] == PATCH["labels"]
        assert tpl["spec"]["schedulerName"] == "kai-scheduler"
        assert tpl["spec"]["nodeSelector"] == {"pool": "gpu"}
        assert tpl["spec"]["tolerations"] == PATCH["tolerations"]
        assert tpl["spec"]["containers"] == obj["spec"]["roles"][role]["template"]["spec"]["containers"]
    assert "labels" not in obj["spec"]["roles"]["Master"]["template"].get("metadata", {})   # input untouched
    again = patch_pod_templates(patched, cat, PATCH)
    assert again["spec"]["roles"]["Worker"]["template"]["spec"]["tolerations"] == PATCH["tolerations"]
    assert interpret(again, cat).pods == interpret(obj, cat).pods


def test_patch_writes_fragmented_fields_through_their_write_path(cat):
    obj = trainer(server={"gpus": 1, "nodeSelector": {"x": "y"}})
    patched = patch_pod_templates(obj, cat, {"labels": {"q": "1"}, "nodeSelector": {"pool": "gpu"}})
    assert patched["spec"]["server"]["labels"] == {"q": "1"}
    assert patched["spec"]["server"]["nodeSelector"] == {"x": "y", "pool": "gpu"}
    with pytest.raises(EvaluationError, match="cannot write schedulerName"):
        patch_pod_templates(obj, cat, {"schedulerName": "volcano"})
    with pytest.raises(InputError, match="unknown keys"):
        patch_pod_templates(obj, cat, {"priority": 1})


# --- the catalog directory ---------------------------------------------------------

def test_user_catalog_dirs_override_and_extend(tmp_path: Path):
    (tmp_path / "trainer.yaml").write_text(yaml.safe_dump(TRAINER))
    (tmp_path / "companions.yaml").write_text("kinds: [example.com/Dataset]\n")
    cat = load_catalog([tmp_path])
    assert cat.lookup("example.com/v1", "Trainer").name == "trainer"
    assert cat.is_companion("example.com/v1", "Dataset") and cat.is_companion("v1", "ConfigMap")
    assert not cat.is_companion("other.io/v1", "Dataset")


def test_two_files_of_one_directory_claiming_a_kind_is_an_error(tmp_path: Path):
    (tmp_path / "a.yaml").write_text(yaml.safe_dump(TRAINER))
    (tmp_path / "b.yaml").write_text(yaml.safe_dump({**TRAINER, "name": "trainer2"}))
    with pytest.raises(DefinitionError, match="also defined in"):
        load_catalog([tmp_path], builtin=False)


def test_pod_selectors_may_be_label_selectors(cat):
    doc = yaml.safe_load(yaml.safe_dump(TRAINER))
    doc["components"][0]["podSelector"] = (
        '{matchLabels: {"example.com/job": $root.metadata.name}, matchExpressions: ['
        '{key: "example.com/index", operator: "NotIn", values: ["0"]}, {key: "example.com/role", operator: "Exists"}]}')
    c = Catalog({}, frozenset()).with_definitions([compile_definition(doc, "t.yaml")])
    inst = interpret(trainer(), c).instances[0]
    assert inst.selector_string() == "example.com/job=t1,example.com/index notin (0),example.com/role"
    assert inst.selects({"example.com/job": "t1", "example.com/index": "1", "example.com/role": "w"})
    assert not inst.selects({"example.com/job": "t1", "example.com/index": "0", "example.com/role": "w"})
    assert not inst.selects({"example.com/job": "t1", "example.com/index": "1"})
    doc["components"][0]["podSelector"] = '{matchExpressions: [{key: "x", operator: "Near"}]}'
    c = Catalog({}, frozenset()).with_definitions([compile_definition(doc, "t.yaml")])
    with pytest.raises(EvaluationError, match="podSelector.*bad matchExpressions entry"):
        interpret(trainer(), c)


def test_let_values_are_computed_once_and_shared(cat):
    doc = yaml.safe_load(yaml.safe_dump(TRAINER))
    doc["let"] = {"scale": ".spec.scale // 1", "double": "$scale * 2"}
    doc["components"][0]["replicas"] = "(.replicas // 1) * $double"
    c = Catalog({}, frozenset()).with_definitions([compile_definition(doc, "t.yaml")])
    master = interpret(trainer(scale=3), c).instances_of("role")[0]
    assert master.replicas == 6
    doc["let"] = {"root": "1"}
    with pytest.raises(DefinitionError, match="let name 'root' must be an identifier"):
        compile_definition(doc, "t.yaml")
    # written out of order (as a definition read back from an API server is): ordered by use
    doc["let"] = {"double": "$scale * 2", "scale": ".spec.scale // 1"}
    c = Catalog({}, frozenset()).with_definitions([compile_definition(doc, "t.yaml")])
    assert interpret(trainer(scale=3), c).instances_of("role")[0].replicas == 6


def test_an_expression_yielding_several_values_is_named(cat):
    doc = yaml.safe_load(yaml.safe_dump(TRAINER))
    doc["components"][0]["podsPerReplica"] = "(1, 2)"
    c = Catalog({}, frozenset()).with_definitions([compile_definition(doc, "t.yaml")])
    with pytest.raises(EvaluationError, match=r"components\[0\].podsPerReplica: expression '\(1, 2\)' failed: "
                                              r"produced 2 values, expected one"):
        interpret(trainer(), c)


def test_suspend_path_comes_from_the_definition(cat):
    from placer.definitions.interpret import suspend_path
    assert suspend_path(trainer(suspend=True), cat) == ["spec", "suspend"]
    assert suspend_path(trainer(), cat) == ["spec", "suspend"]       # where it would go


def test_writes_may_reach_outside_the_instance(tmp_path):
    # a deployment group runs its parent component's scheduler: the write goes there
    doc = yaml.safe_load(textwrap.dedent("""
        name: grouped
        matches: [{apiVersion: example.com/v1, kind: Grouped}]
        components:
        - name: group
          instances: .spec.server.groups[]
          instanceId: .name
          pod:
            fields:
              resources: $root.spec.server.resources
              schedulerName:
                read: $root.spec.server.schedulerName
                write: getpath($path[:-2]) | .schedulerName
                writeFrom: object
              labels: {read: '.labels // {}', write: .labels}
          replicas: .replicas
    """))
    c = Catalog({}, frozenset()).with_definitions([compile_definition(doc, "g.yaml")])
    obj = {"apiVersion": "example.com/v1", "kind": "Grouped", "metadata": {"name": "g"},
           "spec": {"server": {"resources": {"limits": {"nvidia.com/gpu": 1}},
                               "groups": [{"name": "a", "replicas": 2}, {"name": "b", "replicas": 1}]}}}
    patched = patch_pod_templates(obj, c, {"schedulerName": "kai-scheduler", "labels": {"q": "x"}})
    assert patched["spec"]["server"]["schedulerName"] == "kai-scheduler"
    assert [g["labels"] for g in patched["spec"]["server"]["groups"]] == [{"q": "x"}, {"q": "x"}]
    w = interpret(patched, c)
    assert [i.pod.scheduler_name for i in w.instances] == ["kai-scheduler", "kai-scheduler"]
    assert w.pods == 3 and w.gpus == 3


def test_live_bookkeeping_is_not_handed_to_jq_and_the_object_is_untouched(cat):
    obj = trainer()
    obj["metadata"]["managedFields"] = [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}] * 50
    obj["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": "{...}" * 500, "a": "b"}
    before = yaml.safe_dump(obj)
    w = interpret(obj, cat)
    assert w.pods == interpret(trainer(), cat).pods
    assert w.annotations == obj["metadata"]["annotations"]          # the Workload keeps them all
    assert yaml.safe_dump(obj) == before


def test_pod_level_resources_replace_the_containers_total_for_cpu_and_memory():
    """PodLevelResources (on by default since Kubernetes 1.34): the scheduler takes
    spec.resources requests (or limits alone) for cpu and memory instead of the containers' sum."""
    from placer.model.podspec import pod_requests
    spec = {"containers": [_c("a", {"cpu": "1", "memory": "1Gi"}, {"nvidia.com/gpu": 2})],
            "resources": {"requests": {"cpu": "4"}, "limits": {"memory": "8Gi"}}, "overhead": {"cpu": "250m"}}
    assert pod_requests(spec) == {"cpu": 4250, "memory": 8 * 2**30, "nvidia.com/gpu": 2}


def test_lets_are_ordered_by_what_they_use_not_as_written():
    """Found on a real API server: a WorkloadDefinition comes back with its keys sorted, so
    milvus' `streaming` (which uses $ver) came before `ver` and did not compile."""
    import yaml as _yaml

    from placer.definitions.catalog import builtin_catalog_dir, compile_definition

    data = _yaml.safe_load((builtin_catalog_dir() / "milvus.yaml").read_text())
    data["let"] = dict(sorted(data["let"].items()))          # as the API server returns it
    assert list(data["let"]).index("streaming") < list(data["let"]).index("ver")
    compiled = compile_definition(data, "sorted-milvus")
    assert list(compiled.definition.let).index("ver") < list(compiled.definition.let).index("streaming")
    with pytest.raises(Exception, match="cycle"):
        compile_definition({**data, "let": {**data["let"], "comps": "$ver"}}, "cyclic")
