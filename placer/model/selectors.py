"""Label selectors, in the one place placer parses, matches and formats them.

Three forms, as Kubernetes has them:
- a label map (`nodeSelector`, a Service's `selector`, `matchLabels`): every pair must be present;
- requirements as objects (`matchExpressions`, `nodeSelectorTerms[].matchExpressions`):
  In, NotIn, Exists, DoesNotExist, and for nodes Gt and Lt;
- the text form of `labelSelector=` and `kubectl -l` (`region=us-east,tier in (a,b),!legacy`),
  parsed into `Requirement`s (also the syntax of `placer.dev/cluster-selector`).

Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from placer.model.errors import InputError
from placer.model.podspec import value_kind

# LabelSelectorRequirement operators (pod selectors); node selector requirements add Gt and Lt
LABEL_SELECTOR_OPS = ("In", "NotIn", "Exists", "DoesNotExist")
_INT64 = re.compile(r"^[+-]?[0-9]+$")


# --- label maps and requirement objects --------------------------------------------

def matches_labels(match: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A label map selects labels that hold every one of its pairs."""
    return all(labels.get(k) == v for k, v in match.items())


def _int_or_none(value: Any) -> int | None:
    """An integer as Go's strconv.ParseInt(s, 10, 64) reads it, else None: Python's int()
    would also take `1_0`, surrounding spaces, non-ASCII digits and values past int64."""
    text = str(value)
    if not _INT64.fullmatch(text):
        return None
    n = int(text)
    return n if -2**63 <= n < 2**63 else None


def matches_expression(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """One requirement object (In, NotIn, Exists, DoesNotExist; Gt, Lt for nodes)."""
    key, op = expr.get("key", ""), expr.get("operator")    # no label has the key ""
    values = [str(v) for v in (expr.get("values") or ())]
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt"):
        # both sides must be integers, else the requirement does not match (as upstream)
        if not present or len(values) != 1:
            return False
        have, want = _int_or_none(labels[key]), _int_or_none(values[0])
        if have is None or want is None:
            return False
        return have > want if op == "Gt" else have < want
    return False


def matches_label_selector(match: Mapping[str, Any], expressions: Sequence[Mapping[str, Any]],
                           labels: Mapping[str, str]) -> bool:
    """A LabelSelector: its matchLabels and matchExpressions, ANDed."""
    return matches_labels(match, labels) and all(matches_expression(e, labels) for e in expressions)


def match_labels(selector: Any) -> dict[str, str] | None:
    """A Service's selector map, or a LabelSelector's matchLabels; None when there is none
    (or it is not a map of strings)."""
    if not isinstance(selector, dict) or not selector:
        return None
    match = selector.get("matchLabels") if "matchLabels" in selector or "matchExpressions" in selector else selector
    ok = isinstance(match, dict) and match and all(isinstance(v, str) for v in match.values())
    return match if ok else None


def label_selector_parts(raw: Any) -> tuple[dict[str, str], tuple[dict[str, Any], ...]]:
    """A label map, or a LabelSelector {matchLabels, matchExpressions}, as (labels,
    expressions) with string values. ValueError (the message says what is wrong) otherwise."""
    raw = raw or {}
    if not isinstance(raw, dict):
        raise ValueError("expected a label map or a LabelSelector")
    if "matchLabels" not in raw and "matchExpressions" not in raw:
        return {str(k): str(v) for k, v in raw.items()}, ()
    labels, expressions = raw.get("matchLabels") or {}, raw.get("matchExpressions") or []
    if not isinstance(labels, dict):
        raise ValueError(f"matchLabels: expected a map, got {value_kind(labels)}")
    if not isinstance(expressions, list):
        raise ValueError(f"matchExpressions: expected a list, got {value_kind(expressions)}")
    out = []
    for e in expressions:
        if (not isinstance(e, dict) or e.get("operator") not in LABEL_SELECTOR_OPS or not isinstance(e.get("key"), str)
                or not isinstance(e.get("values") or [], list)):
            raise ValueError(f"bad matchExpressions entry {e!r}: needs key, operator ({', '.join(LABEL_SELECTOR_OPS)})"
                             " and a list of values")
        out.append({"key": e["key"], "operator": e["operator"], "values": [str(v) for v in e.get("values") or ()]})
    return {str(k): str(v) for k, v in labels.items()}, tuple(out)


# --- the text form -----------------------------------------------------------------

def format_labels(match: Mapping[str, Any], *, sort: bool = False) -> str:
    """`k=v,k2=v2`: a label map in the text form."""
    items = sorted(match.items()) if sort else match.items()
    return ",".join(f"{k}={v}" for k, v in items)


def format_expression(expr: Mapping[str, Any]) -> str:
    """One requirement object in the text form (`k in (a,b)`, `!k`, `k>3`)."""
    key, op, values = expr.get("key"), expr.get("operator"), ",".join(str(v) for v in expr.get("values") or ())
    return {"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})", "Exists": f"{key}",
            "DoesNotExist": f"!{key}", "Gt": f"{key}>{values}", "Lt": f"{key}<{values}"}.get(str(op), str(expr))


def format_label_selector(match: Mapping[str, Any], expressions: Sequence[Mapping[str, Any]] = ()) -> str:
    """A LabelSelector as the API server takes it in `labelSelector=`."""
    return ",".join([f"{k}={v}" for k, v in match.items()] + [format_expression(e) for e in expressions])


def selector_query(sel: str | Mapping[str, str] | None) -> str | None:
    """A selector for a request's query (text, or a label map); None when it selects all."""
    if sel is None or isinstance(sel, str):
        return sel or None
    return format_labels(sel) or None


def and_selectors(*parts: str | None) -> str:
    """The text selectors ANDed (the empty ones left out)."""
    return ",".join(p for p in parts if p)


_SET_RE = re.compile(r"^\s*(!?)\s*([A-Za-z0-9./_-]+)\s*(?:(notin|in)\s*\(([^)]*)\)|(==|=|!=)\s*([A-Za-z0-9._-]*))?\s*$")


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str                     # in, notin, exists, !exists, =, !=
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        have = labels.get(self.key)
        if self.op in ("=", "in"):
            return have is not None and have in self.values
        if self.op in ("!=", "notin"):
            return have is None or have not in self.values
        if self.op == "exists":
            return have is not None
        return have is None


def _split_selector(text: str) -> list[str]:
    """Split on commas outside parentheses."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p for p in parts if p.strip()]


def parse_label_selector(text: str) -> tuple[Requirement, ...]:
    """`region=us-east,tier in (a,b),!legacy,gpu` -> requirements (ANDed)."""
    reqs = []
    for part in _split_selector(text):
        m = _SET_RE.match(part)
        if not m:
            raise InputError(f"invalid label selector {text!r}: cannot parse {part.strip()!r}")
        neg, key, set_op, set_vals, eq_op, eq_val = m.groups()
        if neg and (set_op or eq_op):
            raise InputError(f"invalid label selector {text!r}: '!' only applies to a bare key")
        if set_op:
            reqs.append(Requirement(key, set_op, tuple(v.strip() for v in set_vals.split(",") if v.strip())))
        elif eq_op:
            reqs.append(Requirement(key, "!=" if eq_op == "!=" else "=", (eq_val,)))
        else:
            reqs.append(Requirement(key, "!exists" if neg else "exists"))
    return tuple(reqs)


def selector_matches(reqs: Sequence[Requirement], labels: Mapping[str, str]) -> bool:
    return all(r.matches(labels) for r in reqs)
