"""Label and field selectors with the API server's syntax and errors."""
from __future__ import annotations

import re
from typing import Callable

Match = Callable[[dict], bool]

_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_./]*[A-Za-z0-9])?"
_SET_RE = re.compile(rf"\s*(?P<key>{_NAME})\s+(?P<op>in|notin)\s+\((?P<vals>[^)]*)\)\s*")
_EXISTS_RE = re.compile(rf"\s*(?P<neg>!?)\s*(?P<key>{_NAME})\s*")
_CMP_RE = re.compile(rf"\s*(?P<key>{_NAME})\s*(?P<op>==|=|!=)\s*(?P<val>[-A-Za-z0-9_.]*)\s*")


class SelectorError(ValueError):
    pass


def _split(selector: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts, depth, cur = [], 0, []
    for ch in selector:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p for p in parts if p.strip()]


def _label_requirement(req: str) -> Callable[[dict], bool]:
    if m := _SET_RE.fullmatch(req):
        key, vals = m["key"], {v.strip() for v in m["vals"].split(",") if v.strip()}
        if m["op"] == "in":
            return lambda labels: labels.get(key) in vals
        return lambda labels: labels.get(key) not in vals
    if m := _CMP_RE.fullmatch(req):
        key, val = m["key"], m["val"]
        if m["op"] == "!=":
            return lambda labels: labels.get(key) != val
        return lambda labels: labels.get(key) == val
    if m := _EXISTS_RE.fullmatch(req):
        key = m["key"]
        if m["neg"]:
            return lambda labels: key not in labels
        return lambda labels: key in labels
    raise SelectorError(f"unable to parse requirement: {req.strip()!r}")


def label_selector(selector: str | None) -> Match | None:
    """A predicate on an object from a labelSelector query string, None when it selects everything."""
    if not selector or not selector.strip():
        return None
    reqs = [_label_requirement(r) for r in _split(selector)]

    def match(obj: dict) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(r(labels) for r in reqs)
    return match


def field_value(obj: dict, path: str) -> str:
    cur: object = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(part)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def field_selector(selector: str | None, allowed: Callable[[str], bool], kind: str = "") -> Match | None:
    """A predicate from a fieldSelector; unsupported fields raise SelectorError like the real server."""
    if not selector or not selector.strip():
        return None
    reqs = []
    for part in selector.split(","):
        m = re.fullmatch(r"\s*([^=!\s]+)\s*(==|=|!=)\s*(.*?)\s*", part)
        if not m:
            raise SelectorError(f"invalid selector: '{selector}'; can't understand '{part}'")
        path, op, val = m.groups()
        if not allowed(path):
            raise SelectorError(f'field label not supported: {path}' if not kind
                                else f'"{path}" is not a known field selector: only "metadata.name", "metadata.namespace"')
        reqs.append((path, op == "!=", val))

    def match(obj: dict) -> bool:
        return all((field_value(obj, p) != v) if neg else (field_value(obj, p) == v) for p, neg, v in reqs)
    return match
