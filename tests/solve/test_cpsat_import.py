"""CP-SAT's native layer loads with the first model, not with the solver (issue 24): the whole
solver package imports without it, and `placer.solve.cpsat.cmh` then serves the module's own
objects. Probes in fresh interpreters."""

import subprocess
import sys

LOADED = "print('ortools.sat.python.cp_model_helper' in sys.modules)"


def _probe(code: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_the_solver_imports_without_cp_sat_and_loads_it_on_first_use():
    code = ("import sys, placer.solve, placer.solve.repair, placer.solve.stages\n"
            f"{LOADED}\n"
            "from placer.solve.cpsat import cmh\n"
            "params = cmh.SatParameters()\n"
            f"{LOADED}\n"
            "from ortools.sat.python import cp_model_helper\n"
            "print(cmh.SatParameters is cp_model_helper.SatParameters, 'SatParameters' in vars(cmh))\n"
            "print(cmh.CpSolverStatus.OPTIMAL == cp_model_helper.CpSolverStatus.OPTIMAL)")
    assert _probe(code) == ["False", "True", "True", "True", "True"]


def test_a_missing_attribute_is_an_attribute_error():
    code = ("from placer.solve.cpsat import cmh\n"
            "try:\n    cmh.NoSuchThing\nexcept AttributeError:\n    print('AttributeError')")
    assert _probe(code) == ["AttributeError"]
