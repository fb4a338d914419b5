"""`-o/--output` for every command, as kubectl spells it.

`table` (default), `wide`, `json`, `yaml`, `name` and `jsonpath=TEMPLATE` (kubectl's
template form: text with `{.path}` expressions, each replaced by its values joined by
spaces). One parser and one error text for every command; a command lists which of these
it offers.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import orjson
import yaml

from placer.model.errors import InputError

ALL = ("table", "wide", "json", "yaml", "name", "jsonpath")
OUTPUT_HELP = "Output format: table, wide, json, yaml, name or jsonpath=TEMPLATE (as kubectl)."


@dataclass(frozen=True)
class Output:
    format: str                       # one of ALL
    template: str = ""                # for jsonpath

    @property
    def tabular(self) -> bool:
        return self.format in ("table", "wide")

    @property
    def wide(self) -> bool:
        return self.format == "wide"


def parse_output(value: str | None, allowed: Sequence[str] = ALL) -> Output:
    """`-o VALUE` -> Output; an unknown or unsupported format is one error text everywhere."""
    value = (value or "table").strip()
    fmt, _, template = value.partition("=")
    if fmt in ("jsonpath", "jsonpath-as-json") and template:
        fmt = "jsonpath"
    if fmt == "jsonpath" and not template:
        raise InputError("-o jsonpath: give a template, e.g. -o jsonpath='{.summary.placed}'")
    if fmt not in allowed or (fmt != "jsonpath" and template):
        offered = ", ".join("jsonpath=TEMPLATE" if f == "jsonpath" else f for f in allowed)
        raise InputError(f"-o {value}: unknown output format; this command offers {offered}")
    if fmt == "jsonpath":
        compile_template(template)               # a bad template fails before any work
    return Output(fmt, template)


# --- jsonpath templates (kubectl's `{.a.b[*].c}` inside free text) ----------------------

_EXPR = re.compile(r"\{([^{}]*)\}")


def compile_template(template: str) -> list[tuple[str, Any]]:
    """The template as parts: ("text", str) or ("path", compiled jsonpath)."""
    from jsonpath_ng.ext import parse

    parts: list[tuple[str, Any]] = []
    pos = 0
    for m in _EXPR.finditer(template):
        parts.append(("text", _unescape(template[pos:m.start()])))
        expr = m.group(1).strip()
        if expr.startswith(("range", "end")):
            raise InputError(f"-o jsonpath: {{{expr}}}: range/end is not supported; use -o json with jq")
        path = "$" + (expr[1:] if expr.startswith("$") else (expr if expr.startswith((".", "[")) else "." + expr))
        try:
            parts.append(("path", parse(path)))
        except Exception as e:          # JsonPathLexerError, JsonPathParserError, and plain ones
            raise InputError(f"-o jsonpath: cannot parse {{{expr}}}: {e}") from None
        pos = m.end()
    parts.append(("text", _unescape(template[pos:])))
    if not any(kind == "path" for kind, _ in parts) and "{" in template:
        raise InputError(f"-o jsonpath: unbalanced braces in {template!r}")
    return parts


def _unescape(text: str) -> str:
    return text.replace("\\n", "\n").replace("\\t", "\t")


def render_jsonpath(data: Any, template: str) -> str:
    out = []
    for kind, part in compile_template(template):
        if kind == "text":
            out.append(part)
            continue
        values = [m.value for m in part.find(data)]
        out.append(" ".join(v if isinstance(v, str) else json.dumps(v) for v in values))
    return "".join(out)


# --- writing -----------------------------------------------------------------------------

def emit(data: Any, output: Output | str, *, names: Iterable[str] = ()) -> None:
    """Machine-readable output on stdout, exactly as data (no rich markup). `names`: what
    `-o name` prints, one `type/name` per line."""
    fmt = output if isinstance(output, Output) else Output(output)
    if fmt.format == "json":
        sys.stdout.write(json_text(data) + "\n")
    elif fmt.format == "yaml":
        sys.stdout.write(yaml.safe_dump(data, sort_keys=False))
    elif fmt.format == "name":
        for n in names:
            sys.stdout.write(f"{n}\n")
    elif fmt.format == "jsonpath":
        sys.stdout.write(render_jsonpath(data, fmt.template))
        if sys.stdout.isatty():
            sys.stdout.write("\n")
    else:
        raise ValueError(f"emit: {fmt.format} is a table format")


def json_text(data: Any) -> str:
    """`json.dumps(data, indent=2)`, byte for byte, by orjson when the data is plain (issue 24: the
    json module indents in Python, 0.05 s of CPU for a 1,000-workload plan; orjson, 0.003 s).
    orjson writes other than json for what `_plain` refuses (floats in exponent form, NaN,
    other types) and for non-ASCII text and DEL, which json escapes: then json writes it."""
    if _plain(data):
        try:
            text = orjson.dumps(data, option=orjson.OPT_INDENT_2).decode()
        except (TypeError, orjson.JSONEncodeError):
            text = ""
        if text and text.isascii() and "\x7f" not in text:
            return text
    return json.dumps(data, indent=2)


def _plain(v: Any) -> bool:
    """Dicts of str keys, lists, tuples, str, bool, None, 64-bit ints and floats json and orjson
    both write in plain notation (shortest round trip, 1e-4 <= |v| < 1e16, or 0)."""
    t = type(v)
    if t is dict:
        return all(type(k) is str and _plain(x) for k, x in v.items())
    if t is list or t is tuple:
        return all(_plain(x) for x in v)
    if t is float:
        return v == 0 or 1e-4 <= abs(v) < 1e16
    if t is int:
        return -(2**63) <= v < 2**64
    return t is str or t is bool or v is None


def print_text(console: Any, text: Any) -> None:
    """`console.print(text)` for a rich Text: written as its plain characters when the console
    writes no styles (not a terminal, no colour, not recording) and nothing in it needs rich's
    rendering (tabs), which is what rich writes then, byte for byte (issue 24: rich took 0.16 s
    of CPU to print a 1,000-workload plan's table of 400 KB, for those same characters)."""
    plain = text.plain
    if (console.color_system is None and not console.is_terminal and not console.record
            and not console.quiet and console.soft_wrap and "\t" not in plain):
        console.file.write(plain + "\n")
    else:
        console.print(text)


def emit_documents(objects: Sequence[Any], output: Output) -> None:
    """Kubernetes objects, as kubectl prints several: a v1 List in JSON, `---`-separated YAML."""
    if output.format == "yaml":
        sys.stdout.write(yaml.safe_dump_all(list(objects), sort_keys=False))
    elif output.format == "json":
        emit({"apiVersion": "v1", "kind": "List", "items": list(objects)}, output)
    else:
        emit({"apiVersion": "v1", "kind": "List", "items": list(objects)}, output,
             names=(resource_name(o) for o in objects))


def resource_name(obj: Any) -> str:
    """kubectl's `-o name`: `kind.group/name` (lowercase kind; core kinds without a group)."""
    api = str(obj.get("apiVersion") or "")
    group = api.rpartition("/")[0]
    kind = str(obj.get("kind") or "").lower()
    return f"{kind}{'.' + group if group else ''}/{(obj.get('metadata') or {}).get('name')}"


def kubectl_name(ref: str) -> str:
    """`Kind ns/name` (placer's report of an object) -> kubectl's `kind/name`."""
    kind, _, where = ref.partition(" ")
    return f"{kind.lower()}/{where.rpartition('/')[2]}"


# Kubernetes' own kinds and their API groups. A workload kind of the same name in another
# group is shown qualified, `Service.serving.knative.dev`, as kubectl names a kind that is
# ambiguous, so that a Knative Service is told from a core Service.
BUILTIN_GROUPS = {"Pod": "", "Service": "", "ConfigMap": "", "Secret": "", "Job": "batch", "CronJob": "batch",
                  "Deployment": "apps", "StatefulSet": "apps", "DaemonSet": "apps", "ReplicaSet": "apps"}


def kind_text(kind: str, group: str | None) -> str:
    """The KIND column: the kind, qualified by its group when the bare name is a built-in kind's."""
    if group is None or BUILTIN_GROUPS.get(kind, group) == group:
        return kind
    return f"{kind}.{group}"


def kind_of_ref(kind: str, ref_text: str) -> str:
    """kind_text of a WorkloadRef's text `ns/Kind.group/name`."""
    middle = ref_text.split("/")[1] if ref_text.count("/") >= 2 else kind
    return kind_text(kind, middle.partition(".")[2])
