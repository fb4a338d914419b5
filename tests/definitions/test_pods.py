"""`pod_shape`: a pod's shape from one row of a definition's program, without an object around it."""

import pytest

from placer.definitions.pods import pod_shape
from placer.definitions.program import Columns
from placer.model.errors import InputError

TEMPLATE = Columns.of(("id", "tpl"))
WITH_FIELDS = Columns.of(("id", "tpl", "f.labels", "f.resources", "f.mainContainer"))


def test_a_template_gives_requests_and_labels():
    tpl = {"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": 2}}}]},
           "metadata": {"labels": {"x": "y"}}}
    shape = pod_shape(["0", tpl], TEMPLATE)
    assert shape.requests == {"cpu": 1000, "nvidia.com/gpu": 2}
    assert shape.labels == {"x": "y"} and shape.node_selector == {} and not shape.overhead_set


def test_fields_override_the_template_and_resources_go_to_the_main_container():
    tpl = {"spec": {"containers": [{"name": "a"}, {"name": "b", "resources": {"requests": {"cpu": "1"}}}]},
           "metadata": {"labels": {"x": "y"}}}
    shape = pod_shape(["0", tpl, {"z": "1"}, {"requests": {"cpu": "2"}}, "b"], WITH_FIELDS)
    assert shape.requests == {"cpu": 2000}
    assert shape.labels == {"z": "1"}
    assert tpl["spec"]["containers"][1]["resources"] == {"requests": {"cpu": "1"}}   # the row is not changed


@pytest.mark.parametrize("tpl,message", [
    ({"spec": {"containers": {}}}, "pod spec.containers: expected a list, got a map '{}'"),
    ({"spec": {"tolerations": "x"}}, "pod spec.tolerations: expected a list, got a string 'x'"),
    ({"spec": {"nodeSelector": {"a": 1}, "containers": []}}, "pod spec.nodeSelector.a: expected a string, got a number '1'"),
])
def test_a_mistyped_field_is_named(tpl, message):
    with pytest.raises(InputError) as e:
        pod_shape(["0", tpl], TEMPLATE)
    assert e.value.message == message
