"""placer's own process ends at once when the command is done (placer.cli.ending, issue 24), and
loses nothing by it: real processes, stdout block-buffered as a user's is (PYTHONUNBUFFERED
unset), so output left in the buffer would be missing; what each run printed is judged by the
app run in this process (CliRunner: no hard exit there) or by the data itself."""

from __future__ import annotations

import json
import os
import platform
import pty
import signal
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from placer.cli import app
from placer.cli.ending import BROKEN_PIPE, FLUSH_FAILED
from placer.model.versions import versions
from tests.cli.test_plan_imports import CLUSTERS, TOO_BIG

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENV = {**{k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}, "PYTHONPATH": ROOT}


@pytest.fixture
def fleet(tmp_path):
    (tmp_path / "clusters.yaml").write_text(CLUSTERS)
    (tmp_path / "big.yaml").write_text(TOO_BIG)
    return tmp_path


def _placer(*args: str, probe: str = "", **kw) -> subprocess.CompletedProcess:
    """`python -m placer ARGS`, or with `probe` (Python run first, as a host's own code) through runpy."""
    cmd = [sys.executable, "-m", "placer", *args] if not probe else \
        [sys.executable, "-c", probe + "\nimport runpy, sys\nsys.argv = ['placer'] + sys.argv[1:]\n"
                                       "runpy.run_module('placer', run_name='__main__')\n", *args]
    kw.setdefault("capture_output", "stdout" not in kw)
    return subprocess.run(cmd, cwd=ROOT, env=ENV, timeout=300, **kw)


def _in_process(*args: str):
    return CliRunner().invoke(app, list(args))


def _without_clock(text: str) -> dict:
    out = json.loads(text)
    out["summary"].pop("timings", None)
    out["summary"].pop("solveSeconds", None)
    return out


def _plans(fleet) -> list[tuple[str, ...]]:
    clusters = str(fleet / "clusters.yaml")
    return [("plan", "--dry-run", "-f", "examples/job.yaml", "--clusters", clusters, "-o", "json"),   # placed: 0
            ("plan", "--dry-run", "-f", str(fleet / "big.yaml"), "--clusters", clusters, "-o", "json")]  # 3


def test_the_output_is_whole_into_a_file_and_a_pipe(fleet):
    """Outputs of a few KiB stay in the stream's buffer until the end: without the final flush
    the file and the pipe would get nothing."""
    for args in _plans(fleet):
        mine = _in_process(*args)
        piped = _placer(*args, text=True)
        with open(fleet / "out.json", "w") as f:
            filed = _placer(*args, stdout=f, stderr=subprocess.PIPE, text=True)
        assert piped.returncode == filed.returncode == mine.exit_code and mine.exit_code in (0, 3), piped.stderr
        assert _without_clock(piped.stdout) == _without_clock((fleet / "out.json").read_text()) \
            == _without_clock(mine.stdout)
    assert {_in_process(*a).exit_code for a in _plans(fleet)} == {0, 3}        # both codes seen
    version = _placer("version", "-o", "json", text=True)
    assert version.returncode == 0 and json.loads(version.stdout) == versions()


def test_the_output_is_whole_on_a_terminal():
    main, other = pty.openpty()
    try:
        done = _placer("version", stdout=other, stderr=subprocess.PIPE)
        os.close(other)
        other = -1
        got = b""
        while chunk := _read(main):
            got += chunk
    finally:
        os.close(main)
        if other >= 0:
            os.close(other)
    assert done.returncode == 0
    assert got.decode().strip().startswith("placer ") and "OR-Tools" in got.decode()


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except OSError:                     # EIO: the terminal's other side is closed, all read
        return b""


@pytest.mark.parametrize("output", ["json", "table"])
def test_a_reader_gone_ends_it_quietly_with_1(fleet, output):
    """`placer plan | head -1` where head has left: no "Exception ignored ... BrokenPipeError" and
    Python's 120 (the buffered rest at exit, before), but 1, as typer ends a write that breaks."""
    read, write = os.pipe()
    os.close(read)
    try:
        args = _plans(fleet)[1][:-2] + ("-o", output)
        done = _placer(*args, stdout=write, stderr=subprocess.PIPE, text=True)
    finally:
        os.close(write)
    assert (done.returncode, done.stderr) == (BROKEN_PIPE, "")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_write_that_fails_at_the_end_is_said_with_pythons_status(fleet):
    with open("/dev/full", "w") as full:
        done = _placer("version", "-o", "json", stdout=full, stderr=subprocess.PIPE, text=True)
    assert done.returncode == FLUSH_FAILED
    assert done.stderr.splitlines() == ["error: cannot write the output: [Errno 28] No space left on device"]


def test_exit_codes_per_path_are_the_apps(fleet):
    clusters = str(fleet / "clusters.yaml")
    paths = [("version",), ("plan", "--bogus"), ("plan", "--dry-run", "-f", str(fleet / "none.yaml"), "--clusters",
             clusters), ("plan", "--dry-run", "-f", "examples/", "--clusters", clusters, "-o", "nope"),
             ("nosuchcommand",), *_plans(fleet)]
    codes = [_placer(*p).returncode for p in paths]
    assert codes == [_in_process(*p).exit_code for p in paths]
    assert set(codes) == {0, 2, 3}


@pytest.mark.skipif(platform.machine() != "x86_64" or not sys.platform.startswith("linux"),
                    reason="reads the blocking system call in /proc (read is 0 on x86_64)")
def test_ctrl_c_ends_it_with_130(fleet):
    proc = subprocess.Popen([sys.executable, "-m", "placer", "plan", "--dry-run", "-f", "-", "--clusters",
                             str(fleet / "clusters.yaml")], cwd=ROOT, env=ENV, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))   # as a terminal gives it
    try:
        while not _reading_stdin(proc.pid):          # placer waits for its input: Ctrl-C lands in the command
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.01)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert (proc.returncode, out, err) == (130, b"", b"")


def _reading_stdin(pid: int) -> bool:
    with open(f"/proc/{pid}/syscall") as f:
        return f.read().startswith("0 0x0 ")


# A host's own code, run before placer's in its process (as a benchmark's or a test's probe is)
FINALIZED = ("import os\nclass Finalized:\n    def __del__(self, write=os.write):\n        write(1, b'FINALIZED\\n')\n"
             "kept = Finalized()")


def test_the_process_ends_without_pythons_teardown_but_its_atexit_handlers_run(fleet, tmp_path):
    """Python's exit would finalize the host's object; the hard exit skips that, but runs the
    atexit handlers: the host's own (printing after placer's output) and logging's, which flushes
    a MemoryHandler that holds its record until closed."""
    log = tmp_path / "host.log"
    probe = (f"{FINALIZED}\nimport atexit, logging, logging.handlers\n"
             f"held = logging.handlers.MemoryHandler(1000, target=logging.FileHandler({str(log)!r}))\n"
             "logging.getLogger('host').addHandler(held)\nlogging.getLogger('host').warning('host record')\n"
             "atexit.register(lambda: print('host at exit'))")
    done = _placer(*_plans(fleet)[1], probe=probe, text=True)
    assert done.returncode == 3, done.stderr
    assert done.stdout.endswith("}\nhost at exit\n") and "FINALIZED" not in done.stdout
    assert log.read_text() == "host record\n"


def test_a_thread_still_running_is_waited_for_by_pythons_exit(tmp_path):
    """A non-daemon thread alive when the command ends: Python's exit, which waits for it. (The
    thread writes once the main thread is done: Python's exit says so before it joins threads.)"""
    mark = tmp_path / "written"
    probe = (f"{FINALIZED}\nimport threading\n"
             "threading.Thread(target=lambda: (threading.main_thread().join(), "
             f"open({str(mark)!r}, 'w').write('done'))).start()")
    done = _placer("version", probe=probe, text=True)
    assert done.returncode == 0 and done.stdout.startswith("placer ")
    assert mark.read_text() == "done" and "FINALIZED" in done.stdout
