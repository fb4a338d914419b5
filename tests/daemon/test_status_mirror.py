"""The staging object's status is made equal to the copy's by one JSON merge patch
(placer/daemon/staging.py status_patch), judged by the test API server's RFC 7386 merge
(tests/kubeapi/patches.py): nested objects merge, so what the copy dropped inside one must be
nulled too. Seen on real clusters (benchmarks/peers_replay.py): a Job's last status before it
finished held `uncountedTerminatedPods: {Succeeded: [uid]}`, the finished one `{}`, and the real
kube-apiserver refused every mirror ("must be empty for finished job") while the uid stayed."""
from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from placer.daemon.staging import status_patch
from tests.kubeapi.patches import merge_patch


def test_a_finished_jobs_status_replaces_the_uncounted_uids_it_held():
    running = {"active": 1, "ready": 0, "uncountedTerminatedPods": {"Succeeded": ["a7baa7fe"]},
               "startTime": "2026-12-05T21:26:00Z"}
    finished = {"succeeded": 1, "ready": 0, "uncountedTerminatedPods": {}, "startTime": "2026-12-05T21:26:00Z",
                "completionTime": "2026-12-05T21:26:12Z",
                "conditions": [{"type": "Complete", "status": "True"}]}
    assert merge_patch(running, status_patch(running, finished)) == finished


def test_nothing_to_do_when_equal_or_both_empty():
    assert status_patch({"a": {"b": 1}}, {"a": {"b": 1}}) is None
    assert status_patch(None, {}) is None


scalars = st.one_of(st.integers(), st.text(max_size=3), st.booleans())
json_objects = st.recursive(st.dictionaries(st.sampled_from("abcd"), scalars, max_size=3),
                            lambda inner: st.dictionaries(st.sampled_from("abcd"),
                                                          st.one_of(scalars, inner, st.lists(scalars, max_size=2)),
                                                          max_size=3),
                            max_leaves=12)


@settings(max_examples=100, deadline=None)
@given(json_objects, json_objects)
@example({"a": {"b": 1, "c": {"d": 2}}}, {"a": {"c": {}}})
def test_one_merge_patch_turns_any_status_into_the_copys(have, want):
    patch = status_patch(have, want)
    assert (have if patch is None else merge_patch(have, patch)) == want or (not have and not want)
