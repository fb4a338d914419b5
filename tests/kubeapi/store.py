"""One cluster's object store: the API machinery semantics (resourceVersion, generation, uid,
finalizers, server-side apply ownership, watch history) without HTTP."""
from __future__ import annotations

import base64
import json
import os
import re
import secrets
import threading
import time
import typing
from collections import OrderedDict
from datetime import datetime, timezone
from typing import Iterator

from . import patches
from .discovery import BUILTINS, ResourceType, crd_resource_types, validate_crd
from .history import Event, History
from .jsonfast import dumps
from .patches import PatchError, clone
from .selectors import SelectorError, field_selector, label_selector

_NAME_RE = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 405: "MethodNotAllowed",
            409: "Conflict", 410: "Expired", 415: "UnsupportedMediaType", 422: "Invalid",
            429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}


class ApiError(Exception):
    """An error the server answers with a v1 Status body."""

    def __init__(self, code: int, message: str, reason: str | None = None, details: dict | None = None,
                 headers: dict | None = None):
        super().__init__(message)
        self.code, self.message, self.details = code, message, details
        self.reason = reason or _REASONS.get(code, "")
        self.headers = headers or {}

    def status(self) -> dict:
        body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": self.message, "reason": self.reason, "code": self.code}
        if self.details:
            body["details"] = self.details
        return body


def not_found(rt: ResourceType, name: str) -> ApiError:
    qualified = f"{rt.plural}.{rt.group}" if rt.group else rt.plural
    return ApiError(404, f'{qualified} "{name}" not found', "NotFound",
                    {"name": name, "group": rt.group, "kind": rt.plural})


def conflict(rt: ResourceType, name: str, why: str) -> ApiError:
    qualified = f"{rt.plural}.{rt.group}" if rt.group else rt.plural
    return ApiError(409, f'Operation cannot be fulfilled on {qualified} "{name}": {why}', "Conflict",
                    {"name": name, "group": rt.group, "kind": rt.plural})


def invalid(rt: ResourceType, name: str, causes: list[tuple[str, str]]) -> ApiError:
    msg = "; ".join(f"{f}: {m}" for f, m in causes)
    return ApiError(422, f'{rt.kind} "{name}" is invalid: {msg}', "Invalid",
                    {"name": name, "group": rt.group, "kind": rt.kind,
                     "causes": [{"reason": "FieldValueInvalid", "message": m, "field": f} for f, m in causes]})


def expired(message: str) -> ApiError:
    return ApiError(410, message, "Expired")


def _uid() -> str:
    """A random RFC 4122 v4 UUID string (uuid.uuid4() costs more than the rest of a seeded object)."""
    h = os.urandom(16).hex()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) % 4]}{h[17:20]}-{h[20:32]}"


_now = (0, "")


def now_rfc3339() -> str:
    global _now
    second = int(time.time())       # formatted once a second: every write stamps managedFields
    if _now[0] != second:
        _now = (second, datetime.fromtimestamp(second, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
    return _now[1]


Key = tuple[str, str]           # (namespace or "", name)


class Store:
    """Thread-safe; stored objects are never mutated in place (writes replace them), so readers may
    serialize references outside the lock."""

    def __init__(self, history: int = 1000, snapshots: int = 128):
        self._lock = threading.RLock()
        self.cond = threading.Condition(self._lock)
        self._watchers: dict[str, threading.Condition] = {}    # ResourceType.key -> its watchers' condition
        self.rv = 1
        self.history = History(history)
        self.types: dict[tuple[str, str, str], ResourceType] = {}
        self.objects: dict[str, dict[Key, dict]] = {}
        self._snapshots: OrderedDict[int, tuple[int, list[dict]]] = OrderedDict()
        self._snapshot_cap = snapshots
        self._snapshot_id = 0
        self._json: dict[int, tuple[dict, bytes]] = {}    # id(stored object) -> (object, its JSON)
        self.watch_epoch = 0        # bumped to make open watches end (fault injection, shutdown)
        self.closed = False
        for rt in BUILTINS:
            self._register(rt)

    @property
    def events(self) -> list[Event]:
        """The watch history (every type), oldest first."""
        return self.history.events

    @property
    def compacted(self) -> int:
        """The oldest resourceVersion a watch or continue may start from."""
        return self.history.compacted

    # ----- types -----------------------------------------------------------------------------

    def _register(self, rt: ResourceType) -> None:
        self.types[(rt.group, rt.version, rt.plural)] = rt
        self.objects.setdefault(rt.key, {})

    def resolve(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self.types.get((group, version, plural))

    def type_for(self, api_version: str, kind: str) -> ResourceType:
        group, _, version = api_version.rpartition("/")
        for rt in self.types.values():
            if rt.group == group and rt.version == version and rt.kind == kind:
                return rt
        raise KeyError(f"no resource type for {api_version} {kind}")

    def served_types(self) -> list[ResourceType]:
        with self.cond:
            return list(self.types.values())

    def _crd_changed(self, old: dict | None, new: dict | None) -> None:
        if old:
            for rt in crd_resource_types(old):
                self.types.pop((rt.group, rt.version, rt.plural), None)
            if new is None:
                gone = crd_resource_types(old)
                if gone:
                    for key, obj in list(self.objects.get(gone[0].key, {}).items()):
                        self._commit(gone[0], key, None, obj)
                    self.objects.pop(gone[0].key, None)
        if new:
            for rt in crd_resource_types(new):
                self._register(rt)

    # ----- reads -------------------------------------------------------------------------------

    def _view(self, rt: ResourceType, obj: dict) -> dict:
        # Multi-version CRDs share storage ("None" conversion): only apiVersion differs per version.
        if obj.get("apiVersion") != rt.group_version:
            obj = {**obj, "apiVersion": rt.group_version}
        return obj

    def _key(self, rt: ResourceType, ns: str | None, name: str) -> Key:
        return (ns or "", name) if rt.namespaced else ("", name)

    def get(self, rt: ResourceType, ns: str | None, name: str) -> dict:
        with self.cond:
            obj = self.objects.get(rt.key, {}).get(self._key(rt, ns, name))
        if obj is None:
            raise not_found(rt, name)
        return self._view(rt, obj)

    def _matcher(self, rt: ResourceType, ns: str | None, labels: str | None, fields: str | None):
        try:
            lm = label_selector(labels)
            fm = field_selector(fields, rt.selectable, rt.kind if rt.crd else "")
        except SelectorError as e:
            raise ApiError(400, str(e)) from None

        def match(obj: dict) -> bool:
            meta = obj["metadata"]
            if ns and meta.get("namespace") != ns:
                return False
            return (lm is None or lm(obj)) and (fm is None or fm(obj))
        return match

    def list(self, rt: ResourceType, ns: str | None = None, labels: str | None = None, fields: str | None = None,
             limit: int = 0, cont: str | None = None) -> dict:
        match = self._matcher(rt, ns, labels, fields)
        with self.cond:
            if cont:
                rv, sid, start = self._decode_continue(cont)
                if rv < self.compacted:
                    raise expired("The provided continue parameter is too old to display a consistent list "
                                  "result. You can start a new list without the continue parameter, or use "
                                  "the continue token in this response to retrieve the remainder of the results.")
                snap = self._snapshots.get(sid)
                if snap is None:    # evicted: serve the current state past the last key (inconsistent)
                    items = [o for k, o in sorted(self.objects.get(rt.key, {}).items())
                             if k > start[1] and match(o)]
                    sid, offset = self._remember(rv, items), 0
                else:
                    self._snapshots.move_to_end(sid)
                    items, offset = snap[1], start[0]
            else:
                rv = self.rv
                items = [o for _, o in sorted(self.objects.get(rt.key, {}).items()) if match(o)]
                offset, sid = 0, None
                if limit and len(items) > limit:
                    sid = self._remember(rv, items)
            end = offset + limit if limit else len(items)
            page = items[offset:end]
            meta: dict = {"resourceVersion": str(rv)}
            if end < len(items):
                if sid is None:
                    sid = self._remember(rv, items)
                meta["continue"] = self._encode_continue(rv, sid, end, self._sort_key(items[end - 1]))
                if not labels and not fields:
                    meta["remainingItemCount"] = len(items) - end
        if any(o.get("apiVersion") != rt.group_version for o in page):
            page = [self._view(rt, o) for o in page]
        return {"kind": f"{rt.kind}List", "apiVersion": rt.group_version, "metadata": meta, "items": page}

    def encode_list(self, rt: ResourceType, listing: dict) -> bytes:
        """The JSON of a list() result, reusing each stored object's cached encoding: large lists
        (thousands of nodes or pods) are served repeatedly by benchmarks."""
        head = dumps({k: v for k, v in listing.items() if k != "items"})
        bucket = self.objects.get(rt.key, {})
        parts = [self._encoded(bucket, obj) for obj in listing["items"]]
        return head[:-1] + b',"items":[' + b",".join(parts) + b"]}"

    def _encoded(self, bucket: dict, obj: dict) -> bytes:
        """One object's JSON, cached while it is the stored object (lists and watches resend it)."""
        hit = self._json.get(id(obj))
        if hit is not None and hit[0] is obj:
            return hit[1]
        data = dumps(obj)
        if bucket.get(self._sort_key(obj)) is obj:      # only what is stored: no stale entries
            self._json[id(obj)] = (obj, data)
        return data

    @staticmethod
    def _sort_key(obj: dict) -> tuple[str, str]:
        return (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])

    def _remember(self, rv: int, items: list[dict]) -> int:
        self._snapshot_id += 1
        self._snapshots[self._snapshot_id] = (rv, items)
        while len(self._snapshots) > self._snapshot_cap:
            self._snapshots.popitem(last=False)
        return self._snapshot_id

    @staticmethod
    def _encode_continue(rv: int, sid: int, offset: int, last: tuple[str, str]) -> str:
        raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "sid": sid, "start": offset, "key": last}).encode()
        return base64.urlsafe_b64encode(raw).decode().rstrip("=")

    @staticmethod
    def _decode_continue(token: str) -> tuple[int, int, tuple[int, Key]]:
        try:
            raw = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
            return int(raw["rv"]), int(raw["sid"]), (int(raw["start"]), tuple(raw["key"]))
        except (ValueError, KeyError, TypeError):
            raise ApiError(400, "continue key is not valid: incorrect encoded start resourceVersion "
                                "(version meta.k8s.io/v1)") from None

    # ----- writes ------------------------------------------------------------------------------

    def _commit(self, rt: ResourceType, key: Key, new: dict | None, old: dict | None, dry_run: bool = False,
                record: bool = True) -> dict | None:
        """Store (or remove, when new is None) one object with a fresh resourceVersion and an event."""
        if dry_run:
            return new if new is not None else old
        self.rv += 1
        if old is not None:
            self._json.pop(id(old), None)
        bucket = self.objects.setdefault(rt.key, {})
        if new is None:
            bucket.pop(key, None)
            gone = clone(old)
            gone["metadata"]["resourceVersion"] = str(self.rv)
            ev = Event(self.rv, rt.key, "DELETED", gone, old)
        else:
            new["metadata"]["resourceVersion"] = str(self.rv)
            bucket[key] = new
            ev = Event(self.rv, rt.key, "ADDED" if old is None else "MODIFIED", new, old)
        if record:
            self._record(ev)
        if rt.key == "apiextensions.k8s.io/customresourcedefinitions":    # after: keeps events in rv order
            self._crd_changed(old, new)
        return new if new is not None else ev.obj

    def _record(self, ev: Event) -> None:
        self.history.record(ev)
        waiting = self._watchers.get(ev.key)
        if waiting is not None:     # only this type's watchers wake: the others have nothing to read
            waiting.notify_all()

    def _wake_watchers(self) -> None:
        for waiting in self._watchers.values():
            waiting.notify_all()

    def compact(self) -> int:
        """Forget all history, as etcd compaction does: older resourceVersions now give 410 (open
        watches behind it are told at once)."""
        with self.cond:
            self.history.compact(self.rv)
            self._snapshots.clear()
            self._wake_watchers()
            return self.rv

    def _new_metadata(self, rt: ResourceType, obj: dict, ns: str | None) -> dict:
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + secrets.token_hex(3)[:5]
        name = meta.get("name")
        if not name:
            raise invalid(rt, "", [("metadata.name", "Required value: name or generateName is required")])
        if not _NAME_RE.fullmatch(name):
            raise invalid(rt, name, [("metadata.name", f'Invalid value: "{name}": a lowercase RFC 1123 '
                                      "subdomain must consist of lower case alphanumeric characters, '-' or '.'")])
        if rt.namespaced:
            if meta.get("namespace") and ns and meta["namespace"] != ns:
                raise ApiError(400, "the namespace of the provided object does not match the namespace "
                                    "sent on the request")
            meta["namespace"] = ns or meta.get("namespace") or "default"
        else:
            meta.pop("namespace", None)
        meta["uid"] = _uid()
        meta["creationTimestamp"] = now_rfc3339()
        meta["generation"] = 1
        for f in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            meta.pop(f, None)
        obj["apiVersion"], obj["kind"] = rt.group_version, rt.kind
        return meta

    def _initial_status(self, rt: ResourceType, obj: dict) -> None:
        if rt.create_status == "keep":
            return
        if isinstance(rt.create_status, dict):
            obj["status"] = dict(rt.create_status)
        elif rt.status:
            obj.pop("status", None)
        if rt.key == "apiextensions.k8s.io/customresourcedefinitions":
            names = (obj.get("spec") or {}).get("names") or {}
            obj["status"] = {"acceptedNames": names, "storedVersions": [
                v["name"] for v in obj["spec"]["versions"] if v.get("storage")],
                "conditions": [{"type": t, "status": "True", "reason": r, "message": m,
                                "lastTransitionTime": now_rfc3339()} for t, r, m in (
                    ("NamesAccepted", "NoConflicts", "no conflicts found"),
                    ("Established", "InitialNamesAccepted", "the initial names have been accepted"))]}

    def _validate(self, rt: ResourceType, obj: dict) -> None:
        if rt.key == "apiextensions.k8s.io/customresourcedefinitions":
            problems = validate_crd(obj)
            if problems:
                raise invalid(rt, obj["metadata"].get("name", ""), problems)

    def create(self, rt: ResourceType, ns: str | None, body: dict, manager: str = "", dry_run: bool = False,
               managed: list[dict] | None = None) -> dict:
        obj = clone(body)
        if not isinstance(obj, dict):
            raise ApiError(400, "the body of the request was in an unknown format")
        with self.cond:
            meta = self._new_metadata(rt, obj, ns)
            self._initial_status(rt, obj)
            self._validate(rt, obj)
            key = self._key(rt, meta.get("namespace"), meta["name"])
            if key in self.objects.get(rt.key, {}):
                raise ApiError(409, f'{rt.plural}{"." + rt.group if rt.group else ""} "{meta["name"]}" '
                                    "already exists", "AlreadyExists",
                               {"name": meta["name"], "group": rt.group, "kind": rt.plural})
            meta.pop("managedFields", None)
            if managed:
                meta["managedFields"] = managed
            else:
                _own_update(obj, None, obj, manager, rt, None)
            return self._view(rt, self._commit(rt, key, obj, None, dry_run))

    def seed(self, objs, events: bool = False) -> int:
        """Insert many objects fast (no HTTP, no managedFields). Unless events=True, the watch history is
        compacted afterwards, so a watch from an older resourceVersion gets 410 and relists."""
        objs = clone(list(objs))
        with self.cond:
            for obj in objs:
                rt = self.type_for(obj["apiVersion"], obj["kind"])
                meta = self._new_metadata(rt, obj, obj.get("metadata", {}).get("namespace"))
                self._validate(rt, obj)
                if rt.key == "apiextensions.k8s.io/customresourcedefinitions":
                    self._initial_status(rt, obj)
                key = self._key(rt, meta.get("namespace"), meta["name"])
                self._commit(rt, key, obj, self.objects.get(rt.key, {}).get(key), record=events)
            if not events:
                self.compact()
            return self.rv

    def _existing(self, rt: ResourceType, ns: str | None, name: str) -> tuple[Key, dict]:
        key = self._key(rt, ns, name)
        old = self.objects.get(rt.key, {}).get(key)
        if old is None:
            raise not_found(rt, name)
        return key, old

    def update(self, rt: ResourceType, ns: str | None, name: str, body: dict, subresource: str | None = None,
               manager: str = "", dry_run: bool = False) -> dict:
        if not isinstance(body, dict):
            raise ApiError(400, "the body of the request was in an unknown format")
        with self.cond:
            key, old = self._existing(rt, ns, name)
            rv = (body.get("metadata") or {}).get("resourceVersion")
            if not rv and rt.crd:       # custom resources do not allow unconditional updates
                raise invalid(rt, name, [("metadata.resourceVersion",
                                          "Invalid value: 0x0: must be specified for an update")])
            if rv and rv != old["metadata"]["resourceVersion"]:
                raise conflict(rt, name, "the object has been modified; please apply your changes to the "
                                         "latest version and try again")
            return self._write(rt, key, old, clone(body), subresource, manager, dry_run)

    def patch(self, rt: ResourceType, ns: str | None, name: str, patch_type: str, body, subresource=None,
              manager: str = "", force: bool = False, dry_run: bool = False) -> tuple[dict, bool]:
        """Returns (object, created)."""
        with self.cond:
            if patch_type == "apply":
                return self._apply(rt, ns, name, body, subresource, manager, force, dry_run)
            key, old = self._existing(rt, ns, name)
            try:
                if patch_type == "json":
                    new = patches.json_patch(old, body)
                elif patch_type == "strategic" and rt.crd:
                    raise ApiError(415, "the body of the request was in an unknown format - accepted media "
                                        "types include: application/json-patch+json, application/merge-patch+json,"
                                        " application/apply-patch+yaml", "UnsupportedMediaType")
                else:
                    if not isinstance(body, dict):
                        raise PatchError("merge patch must be an object")
                    new = patches.merge_patch(old, body)
            except PatchError as e:
                raise ApiError(422 if patch_type == "json" else 400, str(e)) from None
            rv = (new.get("metadata") or {}).get("resourceVersion")
            if rv and rv != old["metadata"]["resourceVersion"]:
                raise conflict(rt, name, "the object has been modified; please apply your changes to the "
                                         "latest version and try again")
            return self._write(rt, key, old, clone(new), subresource, manager, dry_run), False

    def _settle(self, rt: ResourceType, old: dict, new: dict, subresource: str | None) -> dict:
        """Apply the write rules: status vs main resource, immutable metadata, generation."""
        if subresource == "status":
            merged = clone(old)
            if "status" in new:
                merged["status"] = new["status"]
            else:
                merged.pop("status", None)
            merged["metadata"]["managedFields"] = (new.get("metadata") or {}).get("managedFields") \
                or old["metadata"].get("managedFields")
            new = merged
        elif subresource:
            raise ApiError(404, f"the server could not find the requested resource ({subresource})", "NotFound")
        elif rt.status:
            if "status" in old:
                new["status"] = clone(old["status"])
            else:
                new.pop("status", None)
        meta = new.setdefault("metadata", {})
        name = old["metadata"]["name"]
        if meta.get("name", name) != name:
            raise ApiError(400, f"the name of the object ({meta.get('name')}) does not match the name on "
                                f"the URL ({name})")
        for f in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp",
                  "deletionGracePeriodSeconds", "generation"):
            if f in old["metadata"]:
                meta[f] = old["metadata"][f]
            else:
                meta.pop(f, None)
        new["apiVersion"], new["kind"] = rt.group_version, rt.kind
        if _spec_of(new, rt) != _spec_of(old, rt):
            meta["generation"] = old["metadata"].get("generation", 1) + 1
        return new

    def _write(self, rt, key, old, new, subresource, manager, dry_run) -> dict:
        new = self._settle(rt, old, new, subresource)
        self._validate(rt, new)
        meta = new["metadata"]
        meta["resourceVersion"] = old["metadata"]["resourceVersion"]
        _own_update(new, old, new, manager, rt, subresource)
        if _same(new, old):
            return self._view(rt, old)          # no-op writes keep the resourceVersion, as in etcd
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            return self._commit(rt, key, None, old, dry_run)
        return self._view(rt, self._commit(rt, key, new, old, dry_run))

    def _apply(self, rt, ns, name, cfg, subresource, manager, force, dry_run) -> tuple[dict, bool]:
        if not manager:
            raise ApiError(400, "PATCH, application/apply-patch+yaml requires a non-empty fieldManager")
        if not isinstance(cfg, dict) or not cfg.get("apiVersion") or not cfg.get("kind"):
            raise ApiError(400, "invalid object type: apply configuration requires apiVersion and kind")
        if cfg["kind"] != rt.kind:
            raise ApiError(400, f"the kind of the apply configuration ({cfg['kind']}) does not match the "
                                f"resource ({rt.kind})")
        cfg = clone(cfg)
        meta = cfg.setdefault("metadata", {})
        if meta.get("name", name) != name:
            raise ApiError(400, f"the name of the object ({meta['name']}) does not match the name on the URL "
                                f"({name})")
        meta["name"] = name
        if subresource == "status":
            cfg = {"apiVersion": cfg["apiVersion"], "kind": cfg["kind"], "metadata": {"name": name},
                   **({"status": cfg["status"]} if "status" in cfg else {})}
        elif rt.status:
            cfg.pop("status", None)
        mine = patches.leaf_paths(cfg)
        key = self._key(rt, ns, name)
        old = self.objects.get(rt.key, {}).get(key)
        if old is None:
            if subresource:
                raise not_found(rt, name)
            return self.create(rt, ns, cfg, dry_run=dry_run,
                               managed=[_entry(manager, "Apply", rt, mine, None)]), True
        entries = _entries(old)
        me = (manager, "Apply", subresource or "")
        conflicts = []
        for ident, owned in entries.items():
            if ident == me:
                continue
            for p in mine:
                for q in owned:
                    if patches.overlaps(p, q):
                        deep = p if len(p) >= len(q) else q
                        if patches.get_path(cfg, deep, _ABSENT) != patches.get_path(old, deep, _ABSENT):
                            conflicts.append((ident, q))
        if conflicts and not force:
            conflicts = sorted(set(conflicts))
            causes = [{"type": "FieldManagerConflict", "message": f'conflict with "{m[0]}"'
                       + (f' with subresource "{m[2]}"' if m[2] else "") + f": {patches.fmt_path(p)}",
                       "field": patches.fmt_path(p)} for m, p in conflicts]
            lines = "\n".join(f'- {c["message"]}' for c in causes)
            raise ApiError(409, f"Apply failed with {len(conflicts)} conflict{'s' if len(conflicts) > 1 else ''}: "
                                + (causes[0]["message"] if len(causes) == 1 else "\n" + lines),
                           "Conflict", {"causes": causes})
        for ident, q in conflicts:      # forced: the applier takes the conflicting fields
            entries[ident].discard(q)
        new = clone(old)
        others = set().union(*(o for i, o in entries.items() if i != me))
        for p in entries.get(me, set()) - mine:
            if not any(patches.overlaps(p, q) for q in others):
                patches.delete_path(new, p)
        new = _apply_merge(new, cfg)
        entries[me] = mine
        new["metadata"]["managedFields"] = _encode_entries(entries, rt, old)
        settled = self._settle(rt, old, new, subresource)
        self._validate(rt, settled)
        settled["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"]
        if _same(settled, old):
            return self._view(rt, old), False
        if settled["metadata"].get("deletionTimestamp") and not settled["metadata"].get("finalizers"):
            return self._commit(rt, key, None, old, dry_run), False
        return self._view(rt, self._commit(rt, key, settled, old, dry_run)), False

    def delete(self, rt: ResourceType, ns: str | None, name: str, options: dict | None = None,
               dry_run: bool = False) -> dict:
        with self.cond:
            key, old = self._existing(rt, ns, name)
            pre = (options or {}).get("preconditions") or {}
            if pre.get("uid") and pre["uid"] != old["metadata"]["uid"]:
                raise conflict(rt, name, f"Precondition failed: UID in precondition: {pre['uid']}, "
                                         f"UID in object meta: {old['metadata']['uid']}")
            if pre.get("resourceVersion") and pre["resourceVersion"] != old["metadata"]["resourceVersion"]:
                raise conflict(rt, name, "the object has been modified; please apply your changes to the "
                                         "latest version and try again")
            if old["metadata"].get("finalizers"):
                if old["metadata"].get("deletionTimestamp"):
                    return self._view(rt, old)
                new = clone(old)
                new["metadata"]["deletionTimestamp"] = now_rfc3339()
                new["metadata"]["deletionGracePeriodSeconds"] = 0
                return self._view(rt, self._commit(rt, key, new, old, dry_run))
            if rt.key == "/namespaces" and not dry_run:     # the namespace controller, instantly
                for other in {t.key: t for t in self.types.values() if t.namespaced}.values():
                    for k, o in list(self.objects.get(other.key, {}).items()):
                        if k[0] == name:
                            self._commit(other, k, None, o)
            gone = self._view(rt, self._commit(rt, key, None, old, dry_run))
            if rt.key == "/pods":
                return gone
            return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                    "details": {"name": name, "group": rt.group, "kind": rt.plural, "uid": old["metadata"]["uid"]}}

    def delete_collection(self, rt: ResourceType, ns: str | None, labels=None, fields=None,
                          dry_run: bool = False) -> dict:
        with self.cond:
            listed = self.list(rt, ns, labels, fields)
            for obj in listed["items"]:
                self.delete(rt, obj["metadata"].get("namespace"), obj["metadata"]["name"], None, dry_run)
            return listed

    # ----- watch -------------------------------------------------------------------------------

    def watch(self, rt: ResourceType, ns: str | None = None, resource_version: str | None = None,
              labels: str | None = None, fields: str | None = None, bookmarks: bool = False,
              bookmark_interval: float = 5.0, timeout: float = 1800.0, send_initial: bool = False) -> Iterator[dict]:
        """Watch events ({type, object}) until timeout, a dropped watch or a too-old version (an ERROR
        event with a 410 Status). Bad selectors or versions raise here, before any event."""
        batches = self._watch(rt, ns, resource_version, labels, fields, bookmarks, bookmark_interval, timeout,
                              send_initial)
        return self._decoded(rt, batches)

    def watch_json(self, rt: ResourceType, ns: str | None = None, resource_version: str | None = None,
                   labels: str | None = None, fields: str | None = None, bookmarks: bool = False,
                   bookmark_interval: float = 5.0, timeout: float = 1800.0,
                   send_initial: bool = False) -> Iterator[bytes]:
        """The events of watch(), as newline-delimited JSON a batch at a time (what the HTTP front
        streams): each event's object is encoded once for all the watchers it reaches."""
        batches = self._watch(rt, ns, resource_version, labels, fields, bookmarks, bookmark_interval, timeout,
                              send_initial)
        return self._lines(rt, batches)

    def _watch(self, rt, ns, resource_version, labels, fields, bookmarks, bookmark_interval, timeout, send_initial):
        match = self._matcher(rt, ns, labels, fields)
        if resource_version not in (None, "", "0") and not str(resource_version).isdigit():
            raise ApiError(400, f"invalid resource version: {resource_version!r}")
        return self._batches(rt, match, resource_version, bookmarks, bookmark_interval, timeout, send_initial)

    def _decoded(self, rt: ResourceType, batches) -> Iterator[dict]:
        try:
            for batch in batches:
                for item in batch:
                    if isinstance(item, dict):
                        yield item
                    else:
                        kind, obj, ev = item
                        yield {"type": kind, "object": self._view(rt, ev.obj if ev is not None else obj)}
        finally:
            batches.close()

    def _lines(self, rt: ResourceType, batches) -> Iterator[bytes]:
        try:
            for batch in batches:
                yield b"".join(self._line(rt, item) for item in batch)
        finally:
            batches.close()

    def _line(self, rt: ResourceType, item) -> bytes:
        if isinstance(item, dict):
            return dumps(item) + b"\n"
        kind, obj, ev = item
        if ev is not None:
            data = ev.object_json(rt.group_version)
        elif obj.get("apiVersion") == rt.group_version:
            data = self._encoded(self.objects.get(rt.key, {}), obj)
        else:
            data = dumps(self._view(rt, obj))
        return b'{"type":"' + kind.encode() + b'","object":' + data + b"}\n"

    def _watchers_of(self, key: str) -> threading.Condition:
        waiting = self._watchers.get(key)
        if waiting is None:
            waiting = self._watchers[key] = threading.Condition(self._lock)
        return waiting

    def _batches(self, rt, match, resource_version, bookmarks, bookmark_interval, timeout,
                 send_initial) -> Iterator[typing.List]:
        """Lists of ("ADDED", stored object, None) for the initial state, (type, None, Event) for
        changes, and whole event dicts (BOOKMARK, ERROR)."""
        deadline = time.monotonic() + timeout
        key = rt.key
        with self.cond:
            waiting = self._watchers_of(key)
            epoch, too_old = self.watch_epoch, False
            if resource_version in (None, "", "0") or send_initial:     # (watch-list: state, then a bookmark)
                cursor = self.rv
                initial: typing.List = [("ADDED", o, None) for _, o in sorted(self.objects.get(key, {}).items())
                                        if match(o)]
            else:
                cursor = int(resource_version)
                initial = []
                too_old = cursor < self.history.compacted
        if too_old:
            yield [_gone(cursor, self.history.compacted)]
            return
        if send_initial and bookmarks:
            initial.append({"type": "BOOKMARK", "object": {
                "kind": rt.kind, "apiVersion": rt.group_version, "metadata": {
                    "resourceVersion": str(cursor), "annotations": {"k8s.io/initial-events-end": "true"}}}})
        if initial:
            yield initial
        last_bookmark = time.monotonic()
        while True:
            with self.cond:
                while True:
                    if self.closed or self.watch_epoch != epoch:
                        return
                    if self.history.expired(key, cursor):
                        batch = None
                        break
                    if self.history.newest(key) > cursor:
                        batch = self.history.since(key, cursor)
                        break
                    now = time.monotonic()
                    wait = deadline - now
                    if bookmarks:
                        wait = min(wait, last_bookmark + bookmark_interval - now)
                    if wait <= 0:
                        batch = []
                        break
                    waiting.wait(wait)
                head, oldest = self.rv, self.history.compacted
            if batch is None:
                yield [_gone(cursor, oldest)]
                return
            out: typing.List = [(kind, None, ev) for ev in batch if (kind := _transition(ev, match))]
            cursor = max(cursor, head)      # every event of this type up to head is read
            now = time.monotonic()
            if bookmarks and now - last_bookmark >= bookmark_interval and now < deadline:
                last_bookmark = now
                out.append({"type": "BOOKMARK", "object": {"kind": rt.kind, "apiVersion": rt.group_version,
                                                           "metadata": {"resourceVersion": str(cursor)}}})
            if out:
                yield out
            if now >= deadline:
                return

    def drop_watches(self) -> None:
        with self.cond:
            self.watch_epoch += 1
            self._wake_watchers()

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self._wake_watchers()


_ABSENT = object()


def _gone(rv: int, oldest: int) -> dict:
    return {"type": "ERROR", "object": expired(f"too old resource version: {rv} ({oldest})").status()}


def _transition(ev: Event, match) -> str | None:
    now = ev.type != "DELETED" and match(ev.obj)
    before = ev.prev is not None and match(ev.prev)
    if ev.type == "DELETED":
        return "DELETED" if before else None
    if now and before:
        return "MODIFIED"
    if now:
        return "ADDED"
    return "DELETED" if before else None


def _spec_of(obj: dict, rt: ResourceType) -> dict:
    skip = ("metadata", "apiVersion", "kind") + (("status",) if rt.status else ())
    return {k: v for k, v in obj.items() if k not in skip}


def _same(a: dict, b: dict) -> bool:
    strip = lambda o: {**o, "metadata": {k: v for k, v in o["metadata"].items() if k != "managedFields"}}
    if strip(a) != strip(b):
        return False
    owners = lambda o: [(e.get("manager"), e.get("operation"), e.get("fieldsV1"))
                        for e in o["metadata"].get("managedFields") or ()]
    return owners(a) == owners(b)


def _apply_merge(base, cfg):
    if not isinstance(cfg, dict) or not isinstance(base, dict):
        return clone(cfg)
    out = dict(base)
    for k, v in cfg.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = _apply_merge(base.get(k), v)
    return out


Ident = tuple[str, str, str]        # (manager, operation, subresource)


def _entries(obj: dict | None) -> dict[Ident, set]:
    out: dict[Ident, set] = {}
    for e in ((obj or {}).get("metadata") or {}).get("managedFields") or ():
        ident = (e.get("manager", ""), e.get("operation", "Update"), e.get("subresource", ""))
        out[ident] = patches.from_fields_v1(e.get("fieldsV1") or {})
    return out


def _entry(manager: str, operation: str, rt: ResourceType, paths: set, subresource: str | None,
           time_: str | None = None) -> dict:
    e = {"manager": manager, "operation": operation, "apiVersion": rt.group_version,
         "time": time_ or now_rfc3339(), "fieldsType": "FieldsV1", "fieldsV1": patches.to_fields_v1(paths)}
    if subresource:
        e["subresource"] = subresource
    return e


def _encode_entries(entries: dict[Ident, set], rt: ResourceType, old: dict | None) -> list[dict]:
    times = {(e.get("manager", ""), e.get("operation", "Update"), e.get("subresource", "")): e.get("time")
             for e in ((old or {}).get("metadata") or {}).get("managedFields") or ()}
    before = _entries(old) if old else {}
    return [_entry(m, op, rt, paths, sub or None, times.get((m, op, sub)) if old and
                   paths == before.get((m, op, sub)) else None)
            for (m, op, sub), paths in entries.items() if paths]


def _own_update(target: dict, old: dict | None, new: dict, manager: str, rt: ResourceType, subresource) -> None:
    """A non-apply write takes ownership of the fields it changed, from whoever owned them."""
    entries = _entries(old) if old is not None else {}
    changed = patches.changed_paths(old or {}, new) if old is not None else patches.leaf_paths(new)
    if subresource == "status":
        changed = {p for p in changed if p[0] == "status"}
    elif rt.status:
        changed = {p for p in changed if p[0] != "status"}
    changed = {p for p in changed if p[:2] != ("metadata", "managedFields")}
    if not changed and old is not None:
        target["metadata"]["managedFields"] = old["metadata"].get("managedFields") or []
        if not target["metadata"]["managedFields"]:
            target["metadata"].pop("managedFields")
        return
    for owned in entries.values():
        owned -= {q for q in owned if any(patches.overlaps(p, q) for p in changed)}
    present = {p for p in changed if patches.get_path(new, p, _ABSENT) is not _ABSENT}
    if manager and present:
        ident = (manager, "Update", subresource or "")
        entries[ident] = entries.get(ident, set()) | present
    encoded = _encode_entries(entries, rt, old)
    if encoded:
        target["metadata"]["managedFields"] = encoded
    else:
        target["metadata"].pop("managedFields", None)
