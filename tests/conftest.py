"""Fixtures exposing the test Kubernetes API server (tests/kubeapi): see tests/kubeapi/README.md."""
from __future__ import annotations

import re
import shutil

import pytest

from tests.kubeapi import ApiFleet, start_fleet

FLEET_NAMES = ("alpha", "beta", "gamma")


def pytest_configure(config) -> None:
    """hack/kube-env's build progress (one line per component: what, about how long) on the terminal,
    even under -q and while output is captured."""
    from tests import kubeenv  # lazily, as the fixtures below: it loads placer.kube

    def report(line: str) -> None:
        capture = config.pluginmanager.getplugin("capturemanager")
        terminal = config.pluginmanager.getplugin("terminalreporter")
        if terminal is None:
            return
        if capture is None:
            terminal.write_line(line)
            return
        with capture.global_and_fixture_disabled():
            terminal.write_line(line)

    kubeenv.PROGRESS.append(report)


# Real control planes are about 0.5 GiB a cluster. The session's sets (real_kube: hub, east and west;
# real_operators: east and west with the operators) are stopped after the last test that uses them,
# and the tests of real_operators run after every other real test, so the two sets are never up together.
# They cannot be one set: tests on `real` rely on no operator acting on what they create there.
LATE = ("real_operators",)


# Every real-control-plane test runs in one pytest-xdist lane, in collection order: the sets
# are session fixtures started and stopped by the rules above, and two lanes would each start
# their own (double the memory, and ports raced). The other tests spread over the other lanes.
# The lane is chosen by file, since xdist's scheduler sees node ids, not markers (and its
# `xdist_group` marker is lost under pytest 9); `pytest_collection_modifyitems` below refuses a
# `kube` test outside these files.
KUBE_FILES = ("tests/real/", "tests/kube/test_kube_env.py")


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class KubeLane(LoadGroupScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "kube" if nodeid.startswith(KUBE_FILES) else nodeid

    return KubeLane(config, log)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items) -> None:
    stray = [i.nodeid for i in items if i.get_closest_marker("kube") and not i.nodeid.startswith(KUBE_FILES)]
    if stray:
        raise pytest.UsageError(f"{stray[0]}: a kube test outside {', '.join(KUBE_FILES)} (tests/conftest.py "
                                "KUBE_FILES): it would start its own control planes in another xdist lane")
    # the kube lane's tests first (xdist hands out work in this order: the longest lane starts at
    # once), the users of a LATE set last among them
    kube = [i for i in items if i.nodeid.startswith(KUBE_FILES)]
    late = [i for i in kube if any(n in getattr(i, "fixturenames", ()) for n in LATE)]
    first = {id(i) for i in kube}
    ids = {id(i) for i in late}
    items[:] = [i for i in kube if id(i) not in ids] + late + [i for i in items if id(i) not in first]


def pytest_collection_finish(session) -> None:
    from tests import kubeenv

    for name in ("real_kube", *LATE):
        users = [i.nodeid for i in session.items if name in getattr(i, "fixturenames", ())]
        if users:
            kubeenv.LAST_USER[name] = users[-1]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """After the last test of a session set (its function fixtures torn down first): stop the set."""
    from tests import kubeenv

    result = yield
    for name, nodeid in kubeenv.LAST_USER.items():
        if nodeid == item.nodeid:
            kubeenv.release(name)
    return result


@pytest.fixture
def unconfigured(tmp_path, monkeypatch):
    """Nothing configured, on any machine: the working directory is tmp_path (no
    ./clusters.yaml), no $PLACER_CLUSTERS, no $KUBECONFIG and no ~/.kube/config, so placer
    uses the bundled example fleet."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PLACER_CLUSTERS", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


@pytest.fixture(scope="session")
def kube_fleet_session(tmp_path_factory) -> ApiFleet:
    """Three clusters (alpha, beta, gamma) with the catalog CRDs, shared by the whole session."""
    fleet = start_fleet(FLEET_NAMES, tmp_path_factory.mktemp("kubeapi"))
    yield fleet
    fleet.stop()


@pytest.fixture
def kube_fleet(kube_fleet_session) -> ApiFleet:
    """The session fleet; faults and request logs are cleared (and clusters brought back up) after the
    test. Objects persist across tests: use a unique namespace (kube_ns) or fresh_fleet."""
    kube_fleet_session.reset()
    yield kube_fleet_session
    kube_fleet_session.reset()


@pytest.fixture
def make_fleet(tmp_path):
    """Factory for private fleets, stopped after the test:
    make_fleet(names=("alpha", "beta"), crds=True, tokens=False, history=1000, bookmark_interval=5.0,
    watch_timeout=1800.0) -> ApiFleet (kubeconfig in its own tmp directory)."""
    fleets: list[ApiFleet] = []

    def make(names=("alpha", "beta"), **options) -> ApiFleet:
        directory = tmp_path / f"fleet{len(fleets)}"
        directory.mkdir()
        fleets.append(start_fleet(names, directory, **options))
        return fleets[-1]
    yield make
    for fleet in fleets:
        fleet.stop()


@pytest.fixture
def fresh_fleet(make_fleet) -> ApiFleet:
    """A private fleet of two clusters (alpha, beta) with the catalog CRDs: for tests that mutate
    heavily or inject faults."""
    return make_fleet()


@pytest.fixture
def kube_ns(request) -> str:
    """A namespace name unique to this test (namespaces need not exist in the harness)."""
    return re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:50].strip("-") + f"-{id(request) % 10000}"


@pytest.fixture(scope="session")
def kubectl() -> str:
    """Path of the real kubectl: the one hack/kube-env builds (the pinned release; built here when
    Go is present), else one on PATH; tests using it skip where there is neither."""
    from tests import kubeenv as realkube

    if realkube.built() or shutil.which("go"):
        return str(realkube.require_binaries() / "kubectl")
    path = shutil.which("kubectl")
    if not path:
        pytest.skip("kubectl is not installed on this machine: kubectl fidelity checks skipped")
    return path


@pytest.fixture(scope="session")
def real_kube(tmp_path_factory):
    """Real control planes (etcd, kube-apiserver, kube-scheduler, kube-controller-manager) for hub,
    east and west, started by hack/kube-env for the session (building the binaries the first time).
    Skipped with one line where there is no Go; under CI=true that is a failure."""
    from tests import kubeenv as realkube

    realkube.require_binaries()
    env = realkube.held("real_kube", realkube.RealKube(tmp_path_factory.mktemp("kube-env")))
    yield env
    realkube.release("real_kube")


@pytest.fixture(scope="session")
def real_operators(tmp_path_factory):
    """east and west with the real operators (tests/realkube/operators.py OPERATORS) and KWOK, started
    once for the session (built the first time); wiped before each test like `real`."""
    from tests import kubeenv as realkube
    from tests.realkube.operators import NAMES, OPERATORS

    realkube.require_binaries()
    env = realkube.held("real_operators",
                        realkube.RealKube(tmp_path_factory.mktemp("operators"), NAMES, operators=OPERATORS))
    yield env
    realkube.release("real_operators")


@pytest.fixture
def ops(real_operators):
    for name in real_operators.names:
        real_operators.wipe(name)
    return real_operators


@pytest.fixture
def real(real_kube):
    """The session's real clusters, with east and west wiped (no nodes, no test namespaces) before
    the test: each test registers the nodes it needs."""
    for name in ("east", "west"):
        real_kube.wipe(name)
    return real_kube


@pytest.fixture
def env(make_fleet):
    """The daemon tests' world: a hub plus GPU clusters alpha and beta (two 8-GPU nodes
    each), and a daemon harness (tests/daemon/daemon_helpers.py)."""
    from tests.daemon.daemon_helpers import Env, gpu_nodes

    fleet = make_fleet(names=("hub", "alpha", "beta"), bookmark_interval=0.5)
    fleet["alpha"].seed(gpu_nodes("a", 2))
    fleet["beta"].seed(gpu_nodes("b", 2))
    e = Env(fleet)
    yield e
    e.stop()
