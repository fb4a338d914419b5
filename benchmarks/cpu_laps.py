"""The solver's lap clock (`placer.solve._Clock`), recording each lap's CPU seconds too
(time.process_time) into a dict, for benchmarks/plan_cpu.py and benchmarks/greedy_phase.py."""
import time


def cpu_clock(base: type, cpu: dict[str, float]) -> type:
    """A subclass of `base` adding each lap's CPU seconds to `cpu[name]`."""

    class Clock(base):
        def __init__(self, t0):
            super().__init__(t0)
            self.lastc = time.process_time()

        def lap(self, name, waited=0.0):
            super().lap(name, waited)
            now = time.process_time()
            cpu[name] = cpu.get(name, 0.0) + now - self.lastc
            self.lastc = now

    return Clock
