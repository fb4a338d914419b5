"""Starting and stopping real control planes with `hack/kube-env` (its command-line
contract: `up --dir DIR NAME...`, `down --dir DIR`, `nodes --dir DIR --context NAME ...`)."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

REPO = Path(__file__).resolve().parents[2]
# a checkout of another branch may point at its kube-env while the trees are apart
OVERRIDE = "PLACER_KUBE_ENV"


def kube_env_command() -> Path:
    override = os.environ.get(OVERRIDE)
    return Path(override) if override else REPO / "hack" / "kube-env"


def unavailable() -> str | None:
    """Why real control planes cannot be started here (None: they can)."""
    cmd = kube_env_command()
    if not cmd.exists():
        return f"{cmd.relative_to(REPO) if cmd.is_relative_to(REPO) else cmd} is missing"
    if shutil.which("go") is None:
        return "Go is not installed (hack/kube-env builds Kubernetes from its Go modules)"
    return None


class KubeEnvError(RuntimeError):
    pass


def _run(args: list[str], timeout: float) -> str:
    try:
        done = subprocess.run([str(kube_env_command()), *args], capture_output=True, text=True,
                              timeout=timeout, cwd=REPO)
    except subprocess.TimeoutExpired as e:
        raise KubeEnvError(f"hack/kube-env {args[0]} took more than {timeout:.0f}s") from e
    if done.returncode != 0:
        raise KubeEnvError(f"hack/kube-env {' '.join(args[:3])} failed ({done.returncode}): "
                           f"{(done.stderr or done.stdout).strip()[-2000:]}")
    return done.stdout


@dataclass(frozen=True)
class KubeEnv:
    """Control planes started in `directory`, one kubeconfig context per name."""

    directory: Path
    kubeconfig: Path
    names: tuple[str, ...]

    @classmethod
    def up(cls, directory: Path | str, names: Iterable[str], timeout: float = 3600) -> "KubeEnv":
        """Start (or find running) one cluster per name; the first build may take many minutes."""
        directory, names = Path(directory), tuple(names)
        out = _run(["up", "--dir", str(directory), *names], timeout)
        lines = [line.strip() for line in out.splitlines() if line.strip()]
        kubeconfig = Path(lines[-1]) if lines else directory / "kubeconfig"
        if not kubeconfig.exists():
            raise KubeEnvError(f"hack/kube-env up printed {kubeconfig}, which does not exist")
        return cls(directory, kubeconfig, names)

    def down(self, timeout: float = 120) -> None:
        _run(["down", "--dir", str(self.directory)], timeout)

    def nodes(self, context: str, count: int, prefix: str, gpus: int, *, cpu: str | None = None,
              memory: str | None = None, labels: Mapping[str, str] | None = None,
              taints: Iterable[str] = (), kwok: bool = False, timeout: float = 120) -> None:
        """Register `count` Ready nodes named PREFIX-0.. (taints as `k=v:Effect`); with `kwok` the
        cluster's KWOK runs the pods bound there."""
        args = ["nodes", "--dir", str(self.directory), "--context", context, "--count", str(count),
                "--prefix", prefix, "--gpus", str(gpus)]
        if cpu is not None:
            args += ["--cpu", str(cpu)]
        if memory is not None:
            args += ["--memory", str(memory)]
        for k, v in (labels or {}).items():
            args += ["--label", f"{k}={v}"]
        for t in taints:
            args += ["--taint", t]
        if kwok:
            args.append("--kwok")
        _run(args, timeout)
