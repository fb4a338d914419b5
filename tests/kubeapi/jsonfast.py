"""JSON for the harness: orjson (a dependency of placer) where it gives the same document as the
standard library, the standard library for what orjson refuses (non-string keys, integers over 64
bits, NaN, UTF-16 bodies), so that every input is accepted or refused as before; only the bytes
differ (UTF-8 instead of \\u escapes, shorter float exponents), never the decoded values."""
from __future__ import annotations

import json

import orjson

# datetimes and dataclasses go to the standard library, which refuses them as before
_OPTS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


def dumps(obj) -> bytes:
    try:
        return orjson.dumps(obj, option=_OPTS)
    except TypeError:
        return json.dumps(obj, separators=(",", ":")).encode()


def loads(data):
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return json.loads(data)


def clone(obj):
    """Deep copy of a JSON document (as json.loads(json.dumps(obj)), several times faster)."""
    try:
        return orjson.loads(orjson.dumps(obj, option=_OPTS))
    except TypeError:
        return json.loads(json.dumps(obj))
