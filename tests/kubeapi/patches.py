"""Patch semantics: JSON merge patch (RFC 7386), JSON patch (RFC 6902), and the field sets that
server-side apply tracks in managedFields (FieldsV1, lists treated as atomic)."""
from __future__ import annotations

from .jsonfast import clone  # noqa: F401  (the store and the tests take it from here)

Path = tuple[str, ...]


class PatchError(ValueError):
    pass


def merge_patch(target, patch):
    """RFC 7386; `$patch`-style strategic directives are dropped (strategic merge treated as merge)."""
    if not isinstance(patch, dict):
        return clone(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if k.startswith("$"):
            continue
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def _pointer(ptr: str) -> list[str]:
    if ptr == "":
        return []
    if not ptr.startswith("/"):
        raise PatchError(f"invalid JSON pointer {ptr!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in ptr[1:].split("/")]


def _parent(doc, parts: list[str]):
    cur = doc
    for p in parts[:-1]:
        if isinstance(cur, list):
            try:
                cur = cur[int(p)]
            except (ValueError, IndexError):
                raise PatchError(f"path not found: /{'/'.join(parts)}") from None
        elif isinstance(cur, dict) and p in cur:
            cur = cur[p]
        else:
            raise PatchError(f"path not found: /{'/'.join(parts)}")
    return cur


def _get(doc, parts):
    if not parts:
        return doc
    parent, last = _parent(doc, parts), parts[-1]
    try:
        return parent[int(last)] if isinstance(parent, list) else parent[last]
    except (KeyError, ValueError, IndexError, TypeError):
        raise PatchError(f"path not found: /{'/'.join(parts)}") from None


def _remove(doc, parts):
    parent, last = _parent(doc, parts), parts[-1]
    try:
        return parent.pop(int(last) if isinstance(parent, list) else last)
    except (KeyError, ValueError, IndexError, TypeError):
        raise PatchError(f"unable to remove nonexistent key: {last}") from None


def _add(doc, parts, value):
    if not parts:
        return value
    parent, last = _parent(doc, parts), parts[-1]
    if isinstance(parent, list):
        idx = len(parent) if last == "-" else int(last)
        if idx > len(parent):
            raise PatchError(f"index out of range: {idx}")
        parent.insert(idx, value)
    elif isinstance(parent, dict):
        parent[last] = value
    else:
        raise PatchError(f"cannot add at /{'/'.join(parts)}")
    return doc


def json_patch(doc, ops):
    if not isinstance(ops, list):
        raise PatchError("json patch must be a list of operations")
    doc = clone(doc)
    for op in ops:
        kind, parts = op.get("op"), _pointer(op.get("path", ""))
        if kind == "add":
            doc = _add(doc, parts, clone(op["value"]))
        elif kind == "remove":
            _remove(doc, parts)
        elif kind == "replace":
            _get(doc, parts)
            if not parts:
                doc = clone(op["value"])
            else:
                _remove(doc, parts)
                doc = _add(doc, parts, clone(op["value"]))
        elif kind in ("move", "copy"):
            src = _pointer(op["from"])
            value = _remove(doc, src) if kind == "move" else clone(_get(doc, src))
            doc = _add(doc, parts, value)
        elif kind == "test":
            if _get(doc, parts) != op.get("value"):
                raise PatchError(f"testing value /{'/'.join(parts)} failed")
        else:
            raise PatchError(f"unexpected kind of operation: {kind!r}")
    return doc


# --- server-side apply field sets -------------------------------------------------------------

_IGNORED_TOP = {"apiVersion", "kind"}
_IGNORED_META = {"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
                 "managedFields", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"}


def leaf_paths(obj: dict, prefix: Path = ()) -> set[Path]:
    """Paths of the scalar/list/empty-map leaves of an object: what a manager owns."""
    out: set[Path] = set()
    for k, v in obj.items():
        if not prefix and k in _IGNORED_TOP:
            continue
        if prefix == ("metadata",) and k in _IGNORED_META:
            continue
        p = prefix + (k,)
        if isinstance(v, dict) and v:
            out |= leaf_paths(v, p)
        else:
            out.add(p)
    return out


def changed_paths(old: dict, new: dict) -> set[Path]:
    """Leaf paths whose value differs between two objects (added, changed or removed)."""
    a, b = leaf_paths(old), leaf_paths(new)
    return {p for p in a | b if get_path(old, p, _MISSING) != get_path(new, p, _MISSING)}


_MISSING = object()


def get_path(obj, path: Path, default=None):
    cur = obj
    for k in path:
        if not isinstance(cur, dict) or k not in cur:
            return default
        cur = cur[k]
    return cur


def delete_path(obj: dict, path: Path) -> None:
    """Remove a leaf and any maps it leaves empty."""
    parents = []
    cur = obj
    for k in path[:-1]:
        if not isinstance(cur, dict) or k not in cur:
            return
        parents.append((cur, k))
        cur = cur[k]
    if isinstance(cur, dict):
        cur.pop(path[-1], None)
    for parent, k in reversed(parents):
        if parent[k] == {}:
            del parent[k]
        else:
            break


def overlaps(p: Path, q: Path) -> bool:
    n = min(len(p), len(q))
    return p[:n] == q[:n]


def to_fields_v1(paths: set[Path]) -> dict:
    root: dict = {}
    for p in sorted(paths):
        cur = root
        for k in p:
            cur = cur.setdefault(f"f:{k}", {})
    return root


def from_fields_v1(fields: dict, prefix: Path = ()) -> set[Path]:
    out: set[Path] = set()
    for k, v in (fields or {}).items():
        if not k.startswith("f:"):
            continue        # "." or k:/v:/i: list entries: lists are atomic here
        p = prefix + (k[2:],)
        out |= from_fields_v1(v, p) or {p}
    return out


def fmt_path(p: Path) -> str:
    return "." + ".".join(p)
