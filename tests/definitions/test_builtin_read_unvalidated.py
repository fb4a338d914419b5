"""Placer's own catalog is read without its pydantic schema (issue 24: building and running the
models cost every command's start about 0.025 s CPU): `spec.from_document` builds each built-in
definition as it stands. The judge is the schema itself: on every built-in document, and on
documents that use each default and normalisation, the trusted reading equals what
`schema.parse_definition` validates (expressions checked); and a load of the built-ins does not
import the schema, while a user's directory does (so the probe can fail)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from placer.definitions import catalog as K
from placer.definitions.schema import parse_definition
from placer.definitions.spec import FieldExpr, from_document

ROOT = Path(__file__).resolve().parents[2]


def _builtin_documents() -> list[tuple[str, dict]]:
    directory = K.builtin_catalog_dir()
    return [(p.name, doc) for p in K.definition_files(directory)
            for doc in K.list_items(K.read_yaml_documents(p))]


@pytest.mark.parametrize("name,doc", _builtin_documents(), ids=lambda v: v if isinstance(v, str) else "")
def test_every_built_in_document_reads_as_the_schema_validates_it(name, doc):
    assert from_document(doc) == parse_definition(doc, name)


def test_the_loaded_built_in_catalog_holds_the_trusted_reading():
    K._LAYERS.clear()
    served = {d.source: d.definition for d in K.load_catalog(()).by_gvk.values()}
    docs = {str(K.builtin_catalog_dir() / n): d for n, d in _builtin_documents()}
    assert served and all(served[s] == from_document(docs[s]) for s in served)


EVERY_FORM = {
    "name": "widget", "matches": [{"apiVersion": "example.com/v1", "kind": "Widget"}],
    "let": {"b": "$a + 1", "a": ".spec.n # the count"},          # b uses a: read after it
    "components": [
        {"name": "w", "instances": ".spec.parts[]", "replicas": ".replicas # per part",
         "pod": {"fields": {"containers": ".containers", "labels": {"read": ".labels", "write": ".labels"},
                            "schedulerName": {"read": "$root.spec.s", "writeFrom": "object"},
                            "mainContainer": ".main"}}},
        {"name": "v", "pod": {"spec": ".spec.pod", "metadata": ".spec.meta"}, "podSelector": ".sel"}],
    "status": {"rules": [{"phase": "Running", "condition": "Ready"},
                         {"phase": "Failed", "when": ".status.failed # bad", "message": ".status.why"}]},
    "suspend": {"path": ".spec.suspend"},
    "gangs": "[]", "gangPodLabel": "example.com/group",
    "scale": {"replicas": ".spec.parts[].replicas", "unit": "part"},
}
FEWEST = {"name": "bare", "matches": [{"apiVersion": "v1", "kind": "Bare"}],
          "components": [{"name": "one", "pod": {"template": ".spec.template"}}]}


@pytest.mark.parametrize("doc", [EVERY_FORM, FEWEST], ids=["every-form", "fewest"])
def test_defaults_and_normalisations_are_the_schemas(doc):
    trusted = from_document(doc)
    assert trusted == parse_definition(doc, "test")
    if doc is EVERY_FORM:       # what the comparison covers: the forms really are in play
        assert list(trusted.let) == ["a", "b"] and trusted.let["a"].endswith("\n")
        fields = trusted.components[0].pod.fields
        assert fields is not None and isinstance(fields.labels, FieldExpr)
        assert trusted.scale is not None and trusted.scale.default == 1 and trusted.status.rules[0].conditionStatus


def _schema_loaded(code: str) -> bool:
    probe = f"import sys\n{code}\nprint('placer.definitions.schema' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return done.stdout.split() == ["True"]


def test_loading_the_built_in_catalog_imports_no_schema():
    assert not _schema_loaded("from placer.definitions.catalog import load_catalog; load_catalog(())")


def test_a_users_catalog_directory_is_validated_by_the_schema():
    assert _schema_loaded(f"from placer.definitions.catalog import load_catalog; "
                          f"load_catalog([{str(ROOT / 'catalog')!r}], builtin=False)")
