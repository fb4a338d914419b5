"""The clusters file's `quotas:` section (issue 23), validated at the edge:

    quotas:
    - name: research
      members: {namespaces: [research, ml]}      # or {selector: "team=research"} on the workload's labels
      nominal: {nvidia.com/gpu: 32}
      borrowingLimit: {nvidia.com/gpu: 16}        # absent: may borrow all its cohort leaves unused
      cohort: lab                                 # absent: borrows nothing, lends nothing
      weight: 1                                   # fair-share weight
    - name: default                               # workloads in no other quota (no members)
      nominal: {nvidia.com/gpu: 8}

Into frozen `placer.model.quota.Quotas`.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from placer.inputs.resources import _quantity_map, _resource_name
from placer.model.errors import InputError
from placer.model.quantity import canonical
from placer.model.quota import DEFAULT_QUOTA, Quota, Quotas
from placer.model.selectors import parse_label_selector

_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
MAX_WEIGHT = Decimal(10**6)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Members(_Strict):
    namespaces: list[str] | None = None
    selector: str | None = None

    @model_validator(mode="after")
    def _one(self) -> "Members":
        if (self.namespaces is None) == (self.selector is None):
            raise ValueError("give exactly one of namespaces or selector")
        if self.namespaces is not None and not self.namespaces:
            raise ValueError("namespaces: list at least one namespace")
        if self.selector is not None:
            if not self.selector.strip():
                raise ValueError("selector: empty (it would take every workload; use the default entry)")
            try:
                parse_label_selector(self.selector)
            except InputError as e:
                raise ValueError(f"selector: {e.message}") from None
        return self


def _amounts(value: dict[str, Any], what: str) -> dict[str, Any]:
    # resource names and quantities are checked as node amounts are
    for name in value:
        _resource_name(name)
    _quantity_map(value)
    return value


class QuotaSpec(_Strict):
    name: str
    members: Members | None = None
    nominal: dict[str, int | float | str] = Field(min_length=1)
    borrowingLimit: dict[str, int | float | str] | None = None
    cohort: str | None = None
    weight: int | float | str = 1

    @field_validator("nominal", "borrowingLimit")
    @classmethod
    def _resources(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if value is None else _amounts(value, "nominal")

    @field_validator("weight")
    @classmethod
    def _weight(cls, value: Any) -> Any:
        try:
            if isinstance(value, bool):
                raise InvalidOperation
            d = Decimal(str(value).strip())
        except (InvalidOperation, ValueError):
            raise ValueError(f"{value!r} is not a number") from None
        if not d.is_finite() or d <= 0 or d > MAX_WEIGHT:
            raise ValueError(f"{value!r} must be a number above 0 and at most {MAX_WEIGHT:,}")
        return value

    @model_validator(mode="after")
    def _shape(self) -> "QuotaSpec":
        if not _NAME_RE.match(self.name):
            raise ValueError(f"name {self.name!r}: use lower-case letters, digits, '-' and '.'")
        if self.name == DEFAULT_QUOTA and self.members is not None:
            raise ValueError("members: the default entry takes the workloads of no other quota; it names no members")
        if self.name != DEFAULT_QUOTA and self.members is None:
            raise ValueError("members: give namespaces or a selector (only the default entry has none)")
        if self.cohort is not None and not _NAME_RE.match(self.cohort):
            raise ValueError(f"cohort {self.cohort!r}: use lower-case letters, digits, '-' and '.'")
        if self.borrowingLimit is not None:
            if self.cohort is None:
                raise ValueError("borrowingLimit: a quota without a cohort borrows nothing; give a cohort")
            extra = sorted(set(self.borrowingLimit) - set(self.nominal))
            if extra:
                raise ValueError(f"borrowingLimit: {extra[0]} has no nominal amount")
        return self

    def to_quota(self) -> Quota:
        m = self.members
        sel = m.selector if m else None
        return Quota(self.name, {r: canonical(r, v) for r, v in self.nominal.items()},
                     namespaces=frozenset(m.namespaces) if m and m.namespaces is not None else None,
                     selector=parse_label_selector(sel) if sel else None, selector_text=sel,
                     borrowing_limit=None if self.borrowingLimit is None else
                     {r: canonical(r, v) for r, v in self.borrowingLimit.items()},
                     cohort=self.cohort, weight=Decimal(str(self.weight).strip()))


def unique_quotas(quotas: list[QuotaSpec]) -> list[QuotaSpec]:
    names = [q.name for q in quotas]
    for i, name in enumerate(names):
        if name in names[:i]:
            raise ValueError(f"quota {name!r} is given twice (entries {names.index(name)} and {i})")
    return quotas


def to_quotas(specs: list[QuotaSpec] | None) -> Quotas | None:
    """The file's quotas, or None when it gives none."""
    return Quotas(tuple(s.to_quota() for s in specs)) if specs else None


def quota_where(loc: tuple[Any, ...], data: Any, fmt: Callable[[tuple[Any, ...]], str]) -> str | None:
    """An error's place in the `quotas:` section, naming the quota: `quotas: research: nominal`."""
    if len(loc) < 2 or loc[0] != "quotas" or not isinstance(loc[1], int):
        return None
    entry = (data.get("quotas") or [None] * (loc[1] + 1))[loc[1]] if isinstance(data.get("quotas"), list) else None
    name = entry.get("name") if isinstance(entry, dict) and isinstance(entry.get("name"), str) else f"[{loc[1]}]"
    rest = fmt(tuple(loc[2:]))
    return f"quotas: {name}" + (f": {rest}" if rest else "")
