"""Real Kubernetes control planes for the `kube`-marked tests: hack/kube-env started once per session
(see the `real_kube` fixture in conftest.py), plus the small helpers those tests share: registering
nodes, wiping a cluster between tests, waiting for the real scheduler, installing upstream CRDs."""
from __future__ import annotations

import functools
import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any, Callable, Iterable

import pytest
import yaml

from placer.kube import Kube, KubeClient, RetryPolicy
from placer.model.errors import NotFound
from tests.daemon.daemon_helpers import wait_for as _wait_for

REPO = Path(__file__).resolve().parent.parent
KUBE_ENV = REPO / "hack" / "kube-env"
UPSTREAM = REPO.parent / "shared" / "corpus" / "upstream"
NAMES = ("hub", "east", "west")
BUILD_TIMEOUT = 3 * 3600        # a cold build on a small machine
RETRY = RetryPolicy(attempts=4, base=0.1, cap=1.0)
TEST_LABEL = "placer-test/owned"


# Where kube-env's progress lines ("kube-env: building X ... about N min", "kube-env: built X in Ns")
# go: conftest.py adds the terminal reporter, so a cold build says what it builds under -q.
PROGRESS: list[Callable[[str], None]] = []


def kube_env(*args: str, timeout: float = 300) -> str:
    lines: list[str] = []

    def forward(stream) -> None:  # stderr as it comes: a build's progress shows while it builds
        for line in stream:
            lines.append(line)
            if line.startswith(("kube-env: building", "kube-env: built")):
                for report in PROGRESS:
                    report(line.rstrip())

    with subprocess.Popen([str(KUBE_ENV), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True) as proc:
        reader = threading.Thread(target=forward, args=(proc.stderr,), daemon=True)
        reader.start()
        # stdout here, stderr only in the reader (communicate() would race it for stderr's lines)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            out = proc.stdout.read() if proc.stdout else ""
            proc.wait()
            reader.join()
        finally:
            timer.cancel()
        if proc.returncode == -9:
            raise subprocess.TimeoutExpired([str(KUBE_ENV), *args], timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"hack/kube-env {' '.join(args)} failed ({proc.returncode}): {''.join(lines).strip()}")
    return out.strip()


# The session's sets of control planes (conftest.py): held while tests use them, released (down) after
# the last of them or at the end of the session, whichever comes first.
HELD: dict[str, "RealKube"] = {}
LAST_USER: dict[str, str] = {}      # fixture name -> node id of the last test using it


# kubectl's error for a request that never left it (its TLS handshake did not finish), safe to send again
UNSENT = ("net/http: TLS handshake timeout",)
UNSENT_TRIES = 3


def held(name: str, env: "RealKube") -> "RealKube":
    HELD[name] = env
    return env


def release(name: str) -> None:
    env = HELD.pop(name, None)
    if env is not None:
        env.down()


def bindir() -> Path:
    return Path(kube_env("bindir"))


def built() -> bool:
    return all(os.access(bindir() / b, os.X_OK) for b in ("etcd", "kube-apiserver", "kubectl"))


def require_binaries() -> Path:
    """The built binaries, building them when Go is here; else skip (fail under CI=true)."""
    if not built():
        if shutil.which("go") is None:
            why = "no Go on this machine to build the real Kubernetes control planes (hack/kube-env)"
            if os.environ.get("CI") == "true":
                pytest.fail(why + "; CI=true requires them", pytrace=False)
            pytest.skip(why)
        kube_env("build", timeout=BUILD_TIMEOUT)
    return bindir()


def wait_for(predicate: Callable[[], Any], timeout: float = 60.0, what: str = "condition",
             interval: float = 0.2) -> Any:
    """The daemon tests' wait_for with real control planes' pace (slower, longer)."""
    return _wait_for(predicate, timeout, what, interval)


class RealKube:
    """The session's clusters: hack/kube-env up --dir DIR hub east west."""

    def __init__(self, directory: Path, names: Iterable[str] = NAMES, operators: str | None = None,
                 hub: str | None = None):
        """`operators`: hack/kube-env up --operators LIST|all (built the first time: minutes);
        `hub`: that cluster is a placer hub on which nothing runs (`up --hub NAME`)."""
        self.dir, self.names = Path(directory), tuple(names)
        extra = (("--operators", operators) if operators else ()) + (("--hub", hub) if hub else ())
        try:
            self.kubeconfig = Path(kube_env("up", "--dir", str(self.dir), *extra, *self.names,
                                            timeout=BUILD_TIMEOUT if operators else 600).splitlines()[-1])
        except BaseException:   # a failed up leaves what it started: no session fixture would stop it
            subprocess.run([str(KUBE_ENV), "down", "--dir", str(self.dir)], capture_output=True, timeout=120)
            raise
        self.kube = Kube(str(self.kubeconfig), retry=RETRY, timeout=30)

    def client(self, name: str) -> KubeClient:
        return self.kube.client(name)

    def down(self) -> None:
        self.kube.close()
        kube_env("down", "--dir", str(self.dir), timeout=120)

    def kubectl(self, *args: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess:
        # a loaded 2-core machine can keep an API server from finishing a TLS handshake within
        # kubectl's fixed 10 s (seen once in CI): nothing was sent then, so it is tried again
        for _ in range(UNSENT_TRIES):
            proc = subprocess.run([str(bindir() / "kubectl"), "--kubeconfig", str(self.kubeconfig), *args],
                                  capture_output=True, text=True, timeout=120, input=input)
            if proc.returncode == 0 or not any(m in proc.stderr for m in UNSENT):
                break
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {proc.stderr.strip()}")
        return proc

    def nodes(self, context: str, *, count: int, prefix: str, gpus: int, **options) -> None:
        """hack/kube-env nodes; options: cpu, memory, pods, label=[...], taint=[...], cordon, not_ready."""
        args = ["nodes", "--dir", str(self.dir), "--context", context, "--count", str(count),
                "--prefix", prefix, "--gpus", str(gpus)]
        for key, value in options.items():
            flag = "--" + key.replace("_", "-")
            if value is True:
                args.append(flag)
            elif isinstance(value, (list, tuple)):
                for v in value:
                    args += [flag, v]
            else:
                args += [flag, str(value)]
        kube_env(*args)

    # -- between tests ---------------------------------------------------------------------
    def unique(self, base: str) -> str:
        """A namespace name not used before in this session (a deleted one stays Terminating a while)."""
        self._serial = getattr(self, "_serial", 0) + 1
        return f"{base}-{self._serial}"

    def namespace(self, context: str, name: str) -> str:
        """Create namespace `name` (as given: pass unique(...) for a fresh one)."""
        self.client(context).apply({"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": name, "labels": {TEST_LABEL: "true"}}})
        return name

    def purge(self, context: str, gvk: tuple[str, str], ns: str) -> None:
        """Delete every `gvk` object in `ns` at once, finalizers (placer's) dropped first: what
        an earlier test staged on a hub that is never wiped must not reach the next test's daemon."""
        c = self.client(context)
        res = c.resource_for(*gvk)
        for o in c.list(res, ns).items:
            name = o["metadata"]["name"]
            try:
                c.patch(res, name, {"metadata": {"finalizers": None}}, ns)
                c.delete(res, name, ns, missing_ok=True)
            except NotFound:
                pass

    def wipe(self, context: str) -> None:
        """Leave `context` with no nodes and no test namespaces. Without a kubelet nothing finishes a
        bound pod's graceful deletion, so pods are deleted at once (grace 0) after their controllers
        (orphaning, so nothing recreates them) and their finalizers."""
        c = self.client(context)
        namespaces = [n["metadata"]["name"] for n in c.list("namespaces").items
                      if not n["metadata"]["name"].startswith("kube-") and n["metadata"]["name"] != "default"]
        for ns in namespaces:
            for kind in ("jobs", "deployments", "statefulsets", "replicasets"):
                for o in c.list(kind, ns).items:
                    c.delete(kind, o["metadata"]["name"], ns, propagation="Orphan", missing_ok=True)
        for ns in (*namespaces, "default"):
            self.delete_pods(context, ns)
        for ns in namespaces:
            c.delete("namespaces", ns, missing_ok=True)
        for n in c.list("nodes").items:
            c.delete("nodes", n["metadata"]["name"], missing_ok=True)
        # until the namespace controller has emptied them, objects placer created there (JobSets...)
        # would still count as capacity promised to workloads not yet running
        wait_for(lambda: not {n["metadata"]["name"] for n in c.list("namespaces").items} & set(namespaces),
                 120, f"test namespaces deleted on {context}", interval=0.5)

    def delete_pods(self, context: str, ns: str) -> None:
        c = self.client(context)
        for p in c.list("pods", ns).items:
            name = p["metadata"]["name"]
            try:
                if p["metadata"].get("finalizers"):
                    c.patch("pods", name, {"metadata": {"finalizers": None}}, ns)
                c.request("DELETE", f"/api/v1/namespaces/{ns}/pods/{name}", body={"gracePeriodSeconds": 0},
                          content_type="application/json")
            except NotFound:
                pass

    # -- the real scheduler ------------------------------------------------------------------
    def pods(self, context: str, ns: str, selector: str | None = None) -> list[dict]:
        return list(self.client(context).list("pods", ns, label_selector=selector).items)

    def wait_bound(self, context: str, ns: str, count: int, selector: str | None = None,
                   timeout: float = 90) -> list[dict]:
        """The namespace's pods once `count` of them exist and all are bound (spec.nodeName)."""
        def bound():
            pods = self.pods(context, ns, selector)
            return pods if len(pods) >= count and all(p["spec"].get("nodeName") for p in pods) else None
        return wait_for(bound, timeout, f"{count} pods bound in {context}/{ns}")

    def wait_unschedulable(self, context: str, ns: str, timeout: float = 90) -> list[dict]:
        """The pods the scheduler reported unschedulable (PodScheduled=False, reason Unschedulable)."""
        def unschedulable():
            out = [p for p in self.pods(context, ns)
                   if any(c["type"] == "PodScheduled" and c["status"] == "False" and c.get("reason") == "Unschedulable"
                          for c in (p.get("status") or {}).get("conditions") or ())]
            return out or None
        return wait_for(unschedulable, timeout, f"an unschedulable pod in {context}/{ns}")

    def events(self, context: str, ns: str, reason: str) -> list[dict]:
        return [e for e in self.client(context).list("events", ns).items if e.get("reason") == reason]

    # -- CRDs ----------------------------------------------------------------------------------
    def install_crds(self, context: str, files: Iterable[Path | dict]) -> list[str]:
        """Install CRDs, files or parsed (server-side apply: some are too large for the last-applied
        annotation) and wait until each is Established. Returns the CRD names."""
        names = []
        c = self.client(context)
        for item in files:
            for doc in ((item,) if isinstance(item, dict) else crd_documents(Path(item))):
                c.apply(doc, "customresourcedefinitions", force=True)
                names.append(doc["metadata"]["name"])
        for name in names:
            wait_for(lambda n=name: any(cond["type"] == "Established" and cond["status"] == "True" for cond in
                                        (c.get("customresourcedefinitions", n).get("status") or {})
                                        .get("conditions") or ()), 60, f"CRD {name} established")
        c.invalidate()
        return names


@functools.lru_cache(maxsize=None)
def crd_documents(path: Path) -> tuple[dict, ...]:
    """The CRDs of a file, parsed once (upstream CRD files are megabytes: libyaml's parser)."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return tuple(d for d in yaml.load_all(path.read_text(), Loader=loader)
                 if d and d.get("kind") == "CustomResourceDefinition")


@functools.lru_cache(maxsize=None)
def module_crds(operators: str) -> tuple[dict, ...]:
    """The CRDs of these operators (hack/kube-env's names, comma-separated) from their pinned Go
    modules: `hack/kube-env crds`, which builds what is absent (Go needed once, like the clusters)."""
    import json

    try:
        out = kube_env("crds", "--operators", operators, timeout=BUILD_TIMEOUT)
    except RuntimeError:
        if shutil.which("go") is None and os.environ.get("CI") != "true":
            pytest.skip(f"no Go on this machine to build {operators} from its pinned module (hack/kube-env)")
        raise
    return tuple(json.loads(out)["items"])


# CRDs the upstream corpus (../shared) also carries whose operator hack/kube-env builds: tests take
# these from the operator's pinned module (the CRD the real operator serves), not from the corpus
MODULE_CRDS = {"jobsets.jobset.x-k8s.io": "jobset", "leaderworkersets.leaderworkerset.x-k8s.io": "lws",
               "rayclusters.ray.io": "kuberay", "rayjobs.ray.io": "kuberay", "rayservices.ray.io": "kuberay",
               "pytorchjobs.kubeflow.org": "training-operator", "mpijobs.kubeflow.org": "mpi-operator"}


def corpus_crds(files: Iterable[Path]) -> list[dict]:
    """The CRDs of upstream corpus files, each one whose operator kube-env builds taken instead from
    that operator's pinned module (MODULE_CRDS)."""
    out = []
    for path in files:
        for doc in crd_documents(Path(path)):
            operator = MODULE_CRDS.get(doc["metadata"]["name"])
            out.append(next(c for c in module_crds(operator) if c["metadata"]["name"] == doc["metadata"]["name"])
                       if operator else doc)
    return out


def upstream_crds() -> dict[str, list[Path]]:
    """Workload type -> its CRD files under ../shared/corpus/upstream (crd*.yaml)."""
    if not UPSTREAM.is_dir():
        return {}
    return {d.name: sorted(d.glob("crd*.yaml")) for d in sorted(UPSTREAM.iterdir())
            if d.is_dir() and list(d.glob("crd*.yaml"))}
