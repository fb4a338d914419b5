"""How chosen topology domains read in the plan table (`placer plan`): one line per
request under the workload's row, e.g. `example.com/rack=r3`, or, for a workload of many
gangs (LeaderWorkerSet groups), the gangs per domain."""

from __future__ import annotations

from typing import Sequence

from placer.model.topology import TopologyChoice

MAX_GANGS_SHOWN = 3


def _gangs_text(gangs: Sequence[str]) -> str:
    shown = ", ".join(gangs[:MAX_GANGS_SHOWN])
    return shown + (f" +{len(gangs) - MAX_GANGS_SHOWN} more" if len(gangs) > MAX_GANGS_SHOWN else "")


def topology_lines(choices: Sequence[TopologyChoice]) -> list[str]:
    """`KEY=DOMAIN` per request; `(preferred)` where the gang may span several."""
    by_request: dict[tuple[str, bool, tuple[str, ...] | None], list[TopologyChoice]] = {}
    for c in choices:
        by_request.setdefault((c.key, c.required, c.components), []).append(c)
    lines = []
    for (key, required, components), found in by_request.items():
        label = key + (f" [{', '.join(components)}]" if components is not None else "")
        tail = "" if required else " (preferred)"
        if len(found) == 1:
            lines.append(f"{label}={','.join(found[0].domains)}{tail}")
            continue
        per_domain: dict[tuple[str, ...], list[str]] = {}
        for c in found:
            per_domain.setdefault(c.domains, []).append(c.gang)
        parts = [f"{','.join(d)} ({_gangs_text(g)})" for d, g in per_domain.items()]
        lines.append(f"{label}: {'; '.join(parts)}{tail}")
    return lines
