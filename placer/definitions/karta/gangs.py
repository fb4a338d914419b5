"""Gangs before pods exist: Karta defines gangs over pods, so each pod is predicted.

A predicted pod is its template's metadata plus the labels the definition's selectors
promise (the instance id of a `componentInstanceSelector`, the replica index of an
owner's `replicaSelector`, the value of a `componentTypeSelector`) and the object's name
on a key that reads an owner-name label. The real jq of `groupByKeyPaths` and `filters`
then runs over each predicted pod; pods with one key tuple form one gang. Where a key
cannot be predicted the workload is one gang (see `unpredicted_expression`).
"""

from __future__ import annotations

import json
import re

from placer.definitions.karta.schema import Component, Member, PodGroup, PodGroupsEntry
from placer.definitions.karta.tree import Tree, columns

_NAME = '($root.metadata.name // $root.metadata.generateName // "")'
_LABEL = re.compile(r'\.metadata\.labels(?:\["([^"]+)"\]|\.([A-Za-z_][A-Za-z0-9_]*))')
# labels an operator stamps with its owner's name (job-name, cluster, part-of, name)
_OWNER_LABEL = re.compile(r"(^|[/.-])(name|job-name|set-name|cluster|part-of)$")
MAX_COMBINATIONS = 100_000
_STEP = re.compile(r'\s*(?:\.([A-Za-z_][A-Za-z0-9_]*)|\.?\["((?:[^"\\]|\\.)*)"\])')


def static_path(expr: str) -> list[str] | None:
    """The keys of a plain path (`.metadata.labels["a/b"]`), or None: a plain path is read
    and written with `getpath`/`setpath` of a constant, several times cheaper in jq than
    `path(...)` under `try` (this runs once per predicted pod)."""
    keys, pos, text = [], 0, expr.strip()
    if not text.startswith("."):
        return None
    while pos < len(text):
        m = _STEP.match(text, pos)
        if m is None:
            return None
        keys.append(m.group(1) if m.group(1) is not None else json.loads(f'"{m.group(2)}"'))
        pos = m.end()
    return keys or None


def gangs_expression(tree: Tree) -> str | None:
    gang = tree.karta.spec.optimizationInstructions.gangScheduling
    if gang is None or not tree.pod_components:
        return None
    if gang.podGroup is not None:
        return _pod_group(tree, gang.podGroup)
    if gang.podGroups:
        return (f"{_NAME} as $karta_name | [{entries(tree, gang.podGroups)}] as $karta_e"
                f" | if any($karta_e[]; .[1] == null) "
                f"then {_fallback()} else {_grouped()} end")
    return None


def unpredicted_expression(tree: Tree) -> str | None:
    """The key paths that could not be predicted on an object (for a warning), or None when
    the definition has no `podGroups`."""
    gang = tree.karta.spec.optimizationInstructions.gangScheduling
    if gang is None or not gang.podGroups or not tree.pod_components:
        return None
    return f"{_NAME} as $karta_name | [{entries(tree, gang.podGroups)} | select(.[1] == null) | .[6]] | unique"


def _counts(n: int) -> str:
    """Pods of row `$r` of component n, replicas clamped by min/max; `$min`: the gang minimum."""
    num = '(if type == "string" then tonumber else . end)'
    return (f"(($r[1] // 1) | {num}) as $rep | ($r[2] | {num}) as $lo | ($r[3] | {num}) as $hi"
            f" | (if $lo != null and $rep < $lo then $lo else $rep end) as $rep"
            f" | (if $hi != null and $rep > $hi then $hi else $rep end) as $pods"
            f" | (if $lo != null and $lo > 0 and $lo < $pods then $lo else $pods end) as $min")


def _member(tree: Tree, comp: Component, group: PodGroupsEntry) -> Member | None:
    for owner in tree.chain(comp):
        found = next((m for m in group.members if m.componentName == owner.name), None)
        if found:
            return found
    return None


def entries(tree: Tree, groups: list[PodGroupsEntry]) -> str:
    """A jq stream: one entry per (group, pod component instance, replica combination):
    [group, key (null: unpredictable), component, instance, pods, min, miss, total, totalMin]
    (the first six are placer's `keyed` gang rows)
    (an array: jq builds an object key by key, about a microsecond each)."""
    parts = []
    for group in groups:
        for comp in tree.pod_components:
            member = _member(tree, comp, group)
            if member is not None:
                parts.append(_component_entries(tree, comp, member, group.name))
    return ", ".join(parts) or "empty"


def _replica_owners(tree: Tree, comp: Component) -> list[Component]:
    return [a for a in tree.ancestors(comp) if a.podSelector and a.podSelector.replicaSelector]


def _owner_count(owner: Component) -> str:
    path = owner.scaleDefinition.replicasPath if owner.scaleDefinition else None
    if not path:
        return "1"
    return f'([({path})] | .[0] // 1 | if type == "string" then tonumber else . end)'


def _component_entries(tree: Tree, comp: Component, member: Member, group: str) -> str:
    n = tree.pod_index(comp)
    owners = _replica_owners(tree, comp)
    counts = "[" + ", ".join(f"([0, {_owner_count(o)}] | max)" for o in owners) + "]"
    tpl = _template_metadata(comp)
    same, per_combination = _stamps(comp, owners, member)
    fixed = "".join(f" | {s}" for s in same)
    varying = "".join(f" | {s}" for s in per_combination)
    fast = _known_keys(member, owners)
    if fast is None:                        # each predicted pod evaluated in full
        filters = "".join(f" | select(([$pod | ({f})] | .[0]) as $v | $v != null and $v != false)"
                          for f in member.filters)
        per_pod = f" | ($karta_pod{varying}) as $pod{filters} | {_keys(comp, member)} as $k"
        per_row = ""
    else:
        per_row, per_pod = fast[0], f" | {fast[1]} as $k"
    digits = f" | {_digits(len(owners))} as $idx" if "$idx" in per_pod else ""   # about 1 µs a combination
    return (f"($karta_rows_{n}[] as $r | $r[0] as $id | {_counts(n)} | {counts} as $ns"
            f" | ($ns | reduce .[] as $x (1; . * $x)) as $prod"
            f' | if $prod > {MAX_COMBINATIONS} then error("karta: more than {MAX_COMBINATIONS} replica combinations")'
            f" else . end | ([$prod, 1] | max) as $div"         # no combination runs when $prod is 0
            f" | (($pods / $div) | floor) as $pods_q | ($pods % $div) as $pods_r"
            f" | (($min / $div) | floor) as $min_q | ($min % $div) as $min_r"
            f" | ({{metadata: ({{name: $karta_name, namespace: $root.metadata.namespace}} + {tpl})}}{fixed})"
            f" as $karta_pod{per_row} | range(0; $prod) as $c{digits}{per_pod}"
            f" | [{json.dumps(group)}, $k[0], {json.dumps(comp.name)}, $id,"
            f" ($pods_q + (if $c < $pods_r then 1 else 0 end)), ($min_q + (if $c < $min_r then 1 else 0 end)),"
            f" $k[1], $pods, $min])")


def _digits(owners: int) -> str:
    """Combination `$c` as one index per replica owner (the first owner varying slowest, as
    jq's `combinations` orders them), by arithmetic: `combinations` costs about 100 µs a call."""
    if owners == 0:
        return "[]"
    if owners == 1:
        return "[$c]"
    return ("(reduce ($ns | reverse)[] as $x ({i: $c, d: []}; {i: ((.i / $x) | floor), d: ([.i % $x] + .d)})"
            " | .d)")


def _template_metadata(comp: Component) -> str:
    """The predicted pod's labels and annotations as the template gives them."""
    col, spec = columns(comp), comp.specDefinition
    assert spec is not None
    if spec.podTemplateSpecPath:
        meta = f"($r[{col['template']}].metadata // {{}})"
    elif spec.podSpecPath:
        meta = f"($r[{col['metadata']}] // {{}})" if spec.metadataPath else "{}"
    else:
        meta = f"{{labels: ($r[{col['labelsPath']}] // {{}}), annotations: ($r[{col['annotationsPath']}] // {{}})}}"
    return f'({meta} | {{labels: (.labels // {{}}), annotations: (.annotations // {{}})}})'


def _set(path: str, value: str) -> str:
    keys = static_path(path)
    if keys is not None:
        return f"setpath({json.dumps(keys)}; {value})"
    return f"(try setpath([path({path})][0]; {value}) catch .)"


def _stamps(comp: Component, owners: list[Component], member: Member) -> tuple[list[str], list[str]]:
    """The labels a predicted pod is stamped with: (the same for every replica combination,
    those that depend on it). An owner-name label moves to the first list unless a replica
    selector writes that very label (then the order matters)."""
    fixed, varying = [], []
    selector = comp.podSelector
    if selector and selector.componentTypeSelector:
        ts = selector.componentTypeSelector
        if ts.matchLabels:
            fixed.append(f".metadata.labels += {json.dumps(ts.matchLabels)}")
        if ts.keyPath:
            fixed.append(_set(ts.keyPath, json.dumps(ts.value) if ts.value is not None else "$karta_name"))
    if selector and selector.componentInstanceSelector and comp.instanceIdPath:
        fixed.append(_set(selector.componentInstanceSelector.idPath, "$id"))
    written = []
    for k, owner in enumerate(owners):
        assert owner.podSelector and owner.podSelector.replicaSelector
        path = owner.podSelector.replicaSelector.keyPath
        written.append(static_path(path))
        varying.append(_set(path, f"($idx[{k}] | tostring)"))
    for label in owner_labels(member):
        stamp = (f'(if .metadata.labels[{json.dumps(label)}] == null then .metadata.labels[{json.dumps(label)}]'
                 " = $karta_name else . end)")
        clash = any(w is None or w == ["metadata", "labels", label] for w in written)
        (varying if clash else fixed).append(stamp)
    return fixed, varying


def owner_labels(member: Member) -> list[str]:
    """Labels read by the member's key paths that an operator stamps with the owner's name."""
    found = []
    for path in member.groupByKeyPaths:
        for m in _LABEL.finditer(path):
            label = m.group(1) or m.group(2)
            if _OWNER_LABEL.search(label) and label not in found:
                found.append(label)
    return found


def _keys(comp: Component, member: Member) -> str:
    """[key: [values] | null, miss: the first key path without one non-empty value]."""
    if not member.groupByKeyPaths:          # grouping follows owners: the member's instance
        own = "$id" if member.componentName == comp.name else '"0"'
        return f"[[{own}], null]"
    values = ", ".join(_key_value(k) for k in member.groupByKeyPaths)
    paths = json.dumps([k.strip() for k in member.groupByKeyPaths])
    unknown = " or ".join(f"$vs[{k}] == null" for k in range(len(member.groupByKeyPaths)))
    return (f"([{values}] as $vs | if {unknown} then [null,"
            f" ([range(0; $vs | length) | select($vs[.] == null) | {paths}[.]] | first // null)]"
            " else [$vs, null] end)")


def _known_keys(member: Member, owners: list[Component]) -> tuple[str, str] | None:
    """When every key path is a plain path and there are no filters, the key of a replica
    combination is known without building its pod: a key path that is a replica selector's
    path reads the index stamped there; any other reads what every combination shares,
    evaluated once per instance. (a per-row binding, a per-combination [key, miss]), or None
    where the pod must be evaluated (filters, computed paths, overlapping paths)."""
    keys = [static_path(k) for k in member.groupByKeyPaths]
    written = [static_path(o.podSelector.replicaSelector.keyPath) for o in owners
               if o.podSelector and o.podSelector.replicaSelector]
    if (not member.groupByKeyPaths or member.filters or any(k is None for k in keys) or len(written) != len(owners)
            or any(w is None or w == ["metadata", "labels", label] for w in written for label in owner_labels(member))):
        return None
    shared: list[str] = []
    shared_paths: list[str] = []
    values: list[str] = []
    for path, keys_of in zip(member.groupByKeyPaths, keys):
        assert keys_of is not None
        last = max((k for k, w in enumerate(written) if w == keys_of), default=None)
        if last is not None:
            values.append("($c | tostring)" if len(written) == 1 else f"($idx[{last}] | tostring)")
        elif any(w is not None and (w[:len(keys_of)] == keys_of or keys_of[:len(w)] == w) for w in written):
            return None                         # reads around a stamped label: evaluate the pod
        else:
            values.append(f"$karta_kv[{len(shared)}]")
            shared.append(_key_value(path))
            shared_paths.append(path.strip())
    key = f"[{', '.join(values)}]"
    if not shared:                          # index values only: never null
        return "", f"[{key}, null]"
    # an index value is never null: a key is unknown exactly when a shared value is, per row
    missing = "null"                        # the first key path without a value, by nested ifs
    for k in reversed(range(len(shared))):
        missing = f"if $karta_kv[{k}] == null then {json.dumps(shared_paths[k])} else {missing} end"
    per_row = f" | ($karta_pod as $pod | [{', '.join(shared)}]) as $karta_kv | ({missing}) as $karta_miss"
    return per_row, f"(if $karta_miss == null then [{key}, null] else [null, $karta_miss] end)"


def _key_value(path: str) -> str:
    """One non-empty value of a key path over the predicted pod, as a string, or null."""
    keys = static_path(path)
    if keys is not None:
        return (f'($pod | getpath({json.dumps(keys)}) | if . == null then null else tostring'
                ' | if . == "" then null else . end end)')
    return (f"([$pod | ({path})] | if length == 1 and .[0] != null and (.[0] | tostring) != \"\" "
            f"then .[0] | tostring else null end)")


def _grouped() -> str:
    """Entries with one key tuple form one gang: placer's `keyed` gang rows, grouped in
    Python (jq's `group_by`, object building and `ascii_downcase` cost about 15 µs an entry;
    every Karta expression has been evaluated by then)."""
    return "{keyed: $karta_e}"


def _fallback() -> str:
    """One gang for the whole workload: what a consumer does when keys are unknown."""
    return (f"($karta_e | unique_by(.[2:4]) | [{{name: {_NAME}, lowercase: true,"
            f" members: map({{component: .[2], instance: .[3], pods: .[7]}}), minMember: (map(.[8]) | add)}}])")


def _pod_group(tree: Tree, pg: PodGroup) -> str:
    """`podGroup`: one gang per top-level owner; each subgroup sized by its subtree."""
    tops = [s.componentName for s in pg.subGroups] or [tree.karta.root.name]
    rows = []
    for n, comp in enumerate(tree.pod_components):
        if any(tree.in_subtree(comp, t) for t in tops):
            rows.append(f"($karta_rows_{n}[] as $r | {_counts(n)} | {{component: {json.dumps(comp.name)},"
                        f" instance: $r[0], pods: $pods, min: $min}})")
    members = ", ".join(rows) or "empty"
    return (f"[{members}] as $m | [{{name: {json.dumps(pg.name)}, members: ($m | map({{component, instance, pods}})),"
            f" minMember: ($m | map(.min) | add // 0)}}]")
