"""What hack/kube-env and its operator builds share: one-line failures, locks, ports, recorded
processes (pid plus kernel start time, so a reused pid is never signalled), the Go toolchain."""
from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path


def cache_root() -> Path:
    """~/.cache/placer-kube, or $PLACER_KUBE_CACHE: Kubernetes' and the operators' built binaries."""
    return Path(os.environ.get("PLACER_KUBE_CACHE") or Path.home() / ".cache" / "placer-kube")


class Fail(Exception):
    """One line for stderr, and the exit code."""

    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.code = code


def go_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("GOFLAGS", "-buildvcs=false")
    return env


def go(*args: str, cwd: Path) -> None:
    """A go command whose output (build errors) streams to stderr; at low priority, as the machine is shared."""
    proc = subprocess.run(["nice", "-n", "10", "go", *args], cwd=cwd, env=go_env(), stdout=sys.stderr,
                          stderr=sys.stderr)
    if proc.returncode != 0:
        raise Fail(f"go {' '.join(args[:2])} failed in {cwd} (exit {proc.returncode}): see the output above")


# --- small helpers ---------------------------------------------------------------------

@contextmanager
def locked(path: Path):
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def port_free(port: int) -> bool:
    """Free for a server: as Go's listeners do, SO_REUSEADDR (so TIME_WAIT left by our own earlier
    run does not count, a listener does)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def openssl(*args: str) -> None:
    proc = subprocess.run(["openssl", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise Fail(f"openssl {args[0]} failed: {proc.stderr.strip().splitlines()[-1:]}")


def write_json(path: Path, data) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)


# --- processes -------------------------------------------------------------------------

def start_time(pid: int) -> str | None:
    """The kernel's start time of `pid` (field 22 of /proc/pid/stat): tells a recorded process
    from an unrelated one that reused its pid. None when gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] in ("Z", "X") else fields[19]


def alive(record: dict | None) -> bool:
    return bool(record) and start_time(record["pid"]) == record["start"]


def spawn(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> dict:
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, close_fds=True, env=env)
    return {"pid": proc.pid, "start": start_time(proc.pid), "cmd": cmd[0]}


def stop(records: list[dict]) -> None:
    """SIGTERM to the process groups the recorded processes lead, all at once; SIGKILL to what is
    left after 10 s."""
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        left = [r for r in records if alive(r)]
        for r in left:
            try:
                os.killpg(r["pid"], sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while any(alive(r) for r in left) and time.monotonic() < deadline:
            time.sleep(0.05)


def last_log_line(log: Path) -> str:
    try:
        lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "no log"
    return lines[-1][:300] if lines else "empty log"
