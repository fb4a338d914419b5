"""CP-SAT's native layer (`cp_model_helper`), imported when a model is first built.

Importing it costs about 0.1 s of CPU (0.17 s on a loaded machine), which a plan settled by
the greedy, the repair's best fit and the LP bound never needs: 1,000 workloads on 10,000
nodes build no CP-SAT model at all (issue 24). `cmh` reads as the module everywhere (mypy
sees the module itself); its first attribute use imports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any


class _OnFirstUse:
    """The module, imported on the first attribute read (an import statement, so that
    `python -X importtime` shows it); each attribute is then kept here, so that a later
    read costs what a module attribute costs."""

    def __getattr__(self, attr: str) -> Any:
        from ortools.sat.python import cp_model_helper

        value = getattr(cp_model_helper, attr)
        setattr(self, attr, value)
        return value


if TYPE_CHECKING:
    from ortools.sat.python import cp_model_helper as cmh
else:
    cmh = _OnFirstUse()
