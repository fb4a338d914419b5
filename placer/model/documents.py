"""What placer accepts from a file or stdin: UTF-8 text whose documents are plain,
bounded JSON data, as the API server would accept them.

YAML can say more than JSON (binary, sets, non-string keys, timestamps, .inf/.nan,
aliases that expand exponentially), and both can nest without end. Everything placer
reads from users passes through `load_yaml`/`load_json` and `check_tree`, so the rest
of placer sees only dicts with string keys, lists, strings, finite numbers, booleans
and None, and each bad value is one `InputError` naming its file, line and field.
"""

from __future__ import annotations

import datetime
import json
import math
from typing import Any, Iterator

import yaml

from placer.model.errors import InputError

_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_RESOLVED: dict[str, str] = {}
_RESOLVED_MAX = 200_000
_ScalarNode, _MappingNode, _SequenceNode = yaml.ScalarNode, yaml.MappingNode, yaml.SequenceNode
# the first characters the safe loader's implicit resolvers are filed under (it has no
# resolver for any first character, which would be filed under None)
_IMPLICIT_FIRST = frozenset(k for k in _BaseLoader.yaml_implicit_resolvers if k)
assert None not in _BaseLoader.yaml_implicit_resolvers
assert not _BaseLoader.yaml_path_resolvers      # so a mapping's tag is always map, a sequence's seq
_STR, _MAP, _SEQ = "tag:yaml.org,2002:str", "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"


class _Loader(_BaseLoader):  # type: ignore[misc, valid-type]
    """The safe loader, its scalar tags remembered: a scalar's implicit tag (int, bool,
    null, string...) depends only on its text and style, and large files repeat the same
    few texts (issue 24: resolving them was most of reading a clusters file node by node)."""

    # libyaml's composer calls these around every node, for path resolvers, which the safe
    # loader has none of (asserted above): callables written in C that do nothing with their
    # arguments spare a Python frame each (~10% of reading the 1k benchmark's manifests)
    descend_resolver = staticmethod(slice)      # (parent node, index) -> unused
    ascend_resolver = staticmethod(tuple)       # () -> unused

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is not _ScalarNode:          # libyaml asks for every mapping and sequence too
            return _MAP if kind is _MappingNode else _SEQ if kind is _SequenceNode else super().resolve(
                kind, value, implicit)
        if not implicit[0]:          # quoted or block: a string (the safe loader has no path resolvers)
            return _STR
        if value and value[0] not in _IMPLICIT_FIRST:
            return _STR              # no implicit tag's pattern starts with this character
        tag = _RESOLVED.get(value)   # plain: the tag depends on the text alone
        if tag is None:
            if len(_RESOLVED) >= _RESOLVED_MAX:
                _RESOLVED.clear()
            tag = _RESOLVED[value] = super().resolve(kind, value, implicit)
        return tag


# No real manifest nests past ~40 levels (CRD schemas included) or holds more than a few
# thousand values; the API server caps a request at 3 MiB. These bounds stop nesting and
# alias bombs long before they cost memory or a RecursionError.
MAX_DEPTH = 100
MAX_VALUES = 1_000_000
INT64 = (-(2**63), 2**63 - 1)

_TYPE_NAMES = {bytes: "binary data (!!binary)", set: "a set (!!set)", frozenset: "a set",
               tuple: "a tuple", complex: "a complex number"}


def decode(data: bytes, source: str) -> str:
    """UTF-8 text (a BOM is dropped, as kubectl does), or one line naming the bad byte."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[:e.start].count(b"\n") + 1
        raise InputError(f"line {line}: not UTF-8 text (byte 0x{data[e.start]:02x} at offset {e.start})",
                         source=source) from None


def _path(parts: tuple[Any, ...]) -> str:
    out = ""
    for p in parts:
        if isinstance(p, int) or "." in p or "/" in p:      # limits[nvidia.com/gpu], as kubectl names it
            out += f"[{p}]"
        else:
            out += f".{p}" if out else p
    return out or "(document)"


def check_tree(value: Any, source: str, line: int, *, max_values: int = MAX_VALUES) -> Any:
    """Check a decoded document in place (timestamps become strings, as kubectl's YAML
    reader makes them) and return it. Iterative, so depth costs no Python stack; shared
    (aliased) subtrees are counted each time they occur, as serialising would."""
    count = 0
    stack: list[tuple[Any, Any, Any, tuple[Any, ...]]] = [(value, None, None, ())]
    while stack:
        v, parent, key, path = stack.pop()
        count += 1
        if count > max_values:
            raise InputError(f"line {line}: document too large: more than {max_values:,} values "
                             "(after expanding YAML aliases)", source=source)
        if len(path) > MAX_DEPTH:
            raise InputError(f"line {line}: {_path(path[:8])}...: nested deeper than {MAX_DEPTH} levels",
                             source=source)
        t = type(v)
        if t is dict or t is list:
            stack.extend(_children(v, path, source, line))
        elif t in (datetime.date, datetime.datetime):
            parent[key] = _timestamp(v)      # root is never a timestamp: documents are mappings
        else:
            _check_scalar(v, path, source, line)
    return value


def _children(v: dict | list, path: tuple[Any, ...], source: str,
              line: int) -> Iterator[tuple[Any, Any, Any, tuple[Any, ...]]]:
    """(item, its container, its key, its path) for each item of a mapping or a list."""
    items = v.items() if isinstance(v, dict) else enumerate(v)
    for k, item in items:
        if type(k) is not str and isinstance(v, dict):
            raise InputError(f"line {line}: {_path(path)}: key {k!r} is not a string", source=source)
        yield item, v, k, path + (k,)


def _check_scalar(v: Any, path: tuple[Any, ...], source: str, line: int) -> None:
    """A leaf is a string, a boolean, None, a 64-bit integer or a finite float."""
    t = type(v)
    if t is str or t is bool or v is None:
        return
    if t is int:
        if not INT64[0] <= v <= INT64[1]:
            raise InputError(f"line {line}: {_path(path)}: {v} is out of range for a 64-bit integer",
                             source=source)
    elif t is float:
        if not math.isfinite(v):
            raise InputError(f"line {line}: {_path(path)}: {v} is not a finite number", source=source)
    else:
        what = _TYPE_NAMES.get(t, type(v).__name__)
        raise InputError(f"line {line}: {_path(path)}: {what} is not a JSON value", source=source)


def _timestamp(v: datetime.date) -> str:
    if isinstance(v, datetime.datetime):
        text = v.isoformat()
        return text.replace("+00:00", "Z") if v.tzinfo else text + "Z"
    return v.isoformat()


# scalar tags built by PyYAML's own constructor functions, remembered per (tag, text)
_PLAIN = frozenset({"tag:yaml.org,2002:null", "tag:yaml.org,2002:bool", "tag:yaml.org,2002:int",
                    "tag:yaml.org,2002:float"})
_SCALARS: dict[tuple[str, str], Any] = {}


class _Slow(Exception):
    """The document needs PyYAML's full constructor and `check_tree` (another tag, a merge
    key, an alias, a key that is not a string, a value check_tree refuses, deep nesting):
    it is built and checked that way instead, with the same result or the same error."""


def _scalar(loader: Any, node: Any) -> Any:
    """A plain null, bool, int or float, as PyYAML builds it; _Slow for what check_tree
    would refuse (an integer beyond 64 bits, a float that is not finite)."""
    if node.tag not in _PLAIN or type(node.value) is not str:
        raise _Slow
    key = (node.tag, node.value)
    got = _SCALARS.get(key, _SCALARS)
    if got is _SCALARS:
        got = loader.yaml_constructors[node.tag](loader, node)
        if (type(got) is int and not INT64[0] <= got <= INT64[1]) or (type(got) is float and not math.isfinite(got)):
            raise _Slow
        if len(_SCALARS) >= _RESOLVED_MAX:
            _SCALARS.clear()
        _SCALARS[key] = got
    return got


def _tree(loader: Any, node: Any, memo: dict[int, Any], left: list[int], depth: int = 0) -> Any:
    """What PyYAML's safe constructor builds of a mapping or sequence node, already as
    `check_tree` leaves it, built with less Python per node (issue 24: constructing and then
    checking 10,000 manifests took longer than libyaml's parse): plain strings are taken as
    they are, a node met again (an alias) is the same object, as PyYAML makes it, and the
    values are counted against `left[0]` (an aliased subtree at each place it occurs, as
    check_tree counts it); anything check_tree would refuse, or PyYAML build otherwise,
    raises _Slow."""
    got = memo.get(id(node), memo)
    if got is not memo:
        return _again(got, left, depth)
    memo[id(node)] = None
    tag, kind, items = node.tag, node.id, node.value
    left[0] -= len(items)
    if left[0] < 0 or depth >= MAX_DEPTH:
        raise _Slow
    depth += 1
    if tag == _MAP and kind == "mapping":
        out: Any = {}
        for k, v in items:
            if k.tag != _STR or type(k.value) is not str:
                raise _Slow                        # a key that is no string, or !!str on a container
            value = v.value
            if v.tag != _STR:
                value = _scalar(loader, v) if type(value) is str else _tree(loader, v, memo, left, depth)
            elif type(value) is not str:
                raise _Slow                        # !!str on a mapping or a sequence: PyYAML's error
            out[k.value] = value
    elif tag == _SEQ and kind == "sequence":
        out = []
        for v in items:
            value = v.value
            if v.tag != _STR:
                value = _scalar(loader, v) if type(value) is str else _tree(loader, v, memo, left, depth)
            elif type(value) is not str:
                raise _Slow
            out.append(value)
    else:
        raise _Slow
    memo[id(node)] = out
    return out


def _again(got: Any, left: list[int], depth: int) -> Any:
    """A node met again (an alias): its built value, its values counted once more."""
    if got is None:                                # an alias inside itself: check_tree's error
        raise _Slow
    below, height = _extent(got)
    left[0] -= below
    if left[0] < 0 or depth + height >= MAX_DEPTH:
        raise _Slow
    return got


def _extent(value: dict | list) -> tuple[int, int]:
    """The values below a built container, and how many levels of containers it holds below itself."""
    below = height = 0
    stack = [(value, 0)]
    while stack:
        v, level = stack.pop()
        height = max(height, level)
        for item in v.values() if type(v) is dict else v:
            below += 1
            if type(item) is dict or type(item) is list:
                stack.append((item, level + 1))
    return below, height


def checked(loader: Any, node: Any, source: str, line: int, max_values: int = MAX_VALUES) -> Any:
    """The document of a composed node, checked: by `_tree` when it can, else built by
    PyYAML's constructor (which says a bad value in its own order) and checked by check_tree."""
    try:
        return _tree(loader, node, {}, [max_values - 1])
    except Exception:          # _Slow, or a bad value
        pass
    return check_tree(loader.construct_document(node), source, line, max_values=max_values)


def load_yaml(text: str, source: str, *, max_values: int = MAX_VALUES) -> Iterator[tuple[Any, int]]:
    """Each document of a YAML stream with its 1-based starting line, checked."""
    loader = _Loader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            line = node.start_mark.line + 1
            yield checked(loader, node, source, line, max_values), line
    except yaml.YAMLError as e:
        raise yaml_input_error(e, source) from None
    except RecursionError:
        raise InputError(f"malformed YAML: nested deeper than {MAX_DEPTH} levels", source=source) from None
    finally:
        loader.dispose()


# The libyaml of PyYAML 6.0.4's wheels stops at 1000 levels with this problem, before
# check_tree sees the document: the same fault as placer's depth guard, so it reads the same.
LIBYAML_TOO_DEEP = "exceeded maximum nesting depth"


def yaml_input_error(e: yaml.YAMLError, source: str) -> InputError:
    """The one-line InputError for a YAML reader's error (the line is 1-based)."""
    mark = getattr(e, "problem_mark", None)
    problem = getattr(e, "problem", None) or str(e)
    if LIBYAML_TOO_DEEP in problem:
        at = f"line {mark.line + 1}: " if mark else ""
        return InputError(f"{at}nested deeper than {MAX_DEPTH} levels", source=source)
    where = f" (line {mark.line + 1})" if mark else ""
    return InputError(f"malformed YAML{where}: {problem}", source=source)


def load_json(text: str, source: str, *, max_values: int = MAX_VALUES) -> Any:
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        raise InputError(f"malformed JSON (line {e.lineno}): {e.msg}", source=source) from None
    except RecursionError:
        raise InputError(f"malformed JSON: nested deeper than {MAX_DEPTH} levels", source=source) from None
    return check_tree(data, source, 1, max_values=max_values)


def _no_constant(name: str) -> Any:
    # Python's json reads NaN and Infinity; JSON (and the API server) does not
    raise json.JSONDecodeError(f"{name} is not valid JSON", name, 0)
