"""The real operators (and KWOK) beside hack/kube-env's control planes: each pinned in
hack/operators-release, built from the Go module proxy as its own module hack/operators/<name>/ (so
their k8s.io versions never meet), cached with its CRDs and webhook configurations (both taken from
the same module) in ~/.cache/placer-kube/operators/<name>-<version>/."""
from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from kubeenvlib import kueue
from kubeenvlib.common import Fail, cache_root, go, go_env, locked

HACK = Path(__file__).resolve().parent.parent
SOURCE = "kube-env.placer.dev/source"   # annotation on what kube-env installs: module@version
KWOK = "kwok"


@dataclass(frozen=True)
class Pin:
    name: str
    module: str
    version: str


@dataclass(frozen=True)
class Recipe:
    """How one pinned module is built, what it installs and how it runs."""
    package: str                          # the main package, relative to the module ("" = its root)
    minutes: int                          # a cold build's rough duration on 2 shared cores (progress line)
    crds: tuple[str, ...] = ()            # globs under the module's directory
    webhooks: str | None = None           # a kustomize directory whose output holds the webhook configurations
    command: Callable[["Run"], list[str]] = field(default=lambda run: [str(run.binary)])
    ready_path: str = "/readyz"          # on the health port: 200 once its webhooks listen
    namespace: str | None = None          # created before it starts (where it keeps its own objects)
    on_hub: bool = False                  # runs on a hub too (Kueue: the MultiKueue manager)
    peer: bool = False                    # a peer scheduler, not a workload operator: not in `all`
    environ: Callable[["Run"], dict[str, str]] = field(default=lambda run: {})
    objects: tuple[dict, ...] = ()        # applied before it starts (what it insists on finding)
    added: tuple[tuple[str, str], ...] = ()   # (path in the module, Go source) added at build time


@dataclass(frozen=True)
class Run:
    """One operator process of one cluster."""
    binary: Path
    home: Path                            # DIR/<cluster>/operators/<name>
    kubeconfig: Path
    webhook_port: int
    health_port: int
    operators: tuple[str, ...] = ()       # every operator of the cluster (Kueue integrates with them)

    @property
    def certs(self) -> Path:
        return self.home / "certs"


def kubebuilder_command(config_api: str) -> Callable[[Run], list[str]]:
    """JobSet's and LWS's shared configuration shape: webhooks on 127.0.0.1 with kube-env's
    certificate, no metrics, no leader election, no certificate rotation of their own."""
    def command(run: Run) -> list[str]:
        config = {"apiVersion": config_api, "kind": "Configuration",
                  "webhook": {"port": run.webhook_port, "host": "127.0.0.1", "certDir": str(run.certs)},
                  "metrics": {"bindAddress": "0"},
                  "health": {"healthProbeBindAddress": f"127.0.0.1:{run.health_port}"},
                  "leaderElection": {"leaderElect": False},
                  "internalCertManagement": {"enable": False}}
        path = run.home / "config.yaml"
        path.write_text(json.dumps(config, indent=1) + "\n")  # JSON is YAML
        return [str(run.binary), f"--config={path}", f"--kubeconfig={run.kubeconfig}", "--zap-log-level=info"]
    return command


def kuberay_command(run: Run) -> list[str]:
    """KubeRay's webhook server has no address option (controller-runtime's :9443 on every
    interface: two clusters would collide) and is off by default (ENABLE_WEBHOOKS), as in its own
    Helm chart: the operator runs without webhooks."""
    return [str(run.binary), "--metrics-addr=0", f"--health-probe-bind-address=127.0.0.1:{run.health_port}",
            "--enable-leader-election=false", f"--kubeconfig={run.kubeconfig}"]


def training_operator_command(run: Run) -> list[str]:
    """The training operator (v1.9.3) always runs open-policy-agent's cert-controller (pkg/cert:
    no flag turns it off). It needs the Secret it rotates (kube-env creates it empty in kube-system,
    which tests never wipe: the rotator fills it with a CA of its own that nothing uses) and waits for
    the file /tmp/k8s-webhook-server/serving-certs/tls.crt (a constant path: kube-env puts its webhook
    certificate there when absent). Its webhook server reads kube-env's certificate from
    $TMPDIR/k8s-webhook-server/serving-certs (controller-runtime's default under os.TempDir()), and its
    webhook configuration is renamed by kube-env, so the rotator never injects its own CA: the API
    server trusts kube-env's CA only. The server listens on every interface (no address option), on
    a port of its own per cluster. MPIJob (kubeflow.org/v1) is left to the MPI operator (v2beta1), as
    kubeflow's docs ask when both run."""
    serving = run.home / "tmp" / "k8s-webhook-server" / "serving-certs"
    serving.mkdir(parents=True, exist_ok=True)
    for name in ("tls.crt", "tls.key"):
        shutil.copyfile(run.certs / name, serving / name)
    waited = Path("/tmp/k8s-webhook-server/serving-certs/tls.crt")
    if not waited.exists():
        waited.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(run.certs / "tls.crt", waited)
    return [str(run.binary), "--metrics-bind-address=0", f"--health-probe-bind-address=127.0.0.1:{run.health_port}",
            f"--webhook-server-port={run.webhook_port}", f"--kubeconfig={run.kubeconfig}",
            *(f"--enable-scheme={kind}" for kind in TRAINING_KINDS), "--zap-log-level=info"]


TRAINING_KINDS = ("tfjob", "pytorchjob", "xgboostjob", "paddlejob", "jaxjob")
TRAINING_NAMESPACE = "kube-system"    # MY_POD_NAMESPACE: where its cert-controller's Secret lives


def mpi_operator_command(run: Run) -> list[str]:
    """The MPI operator (v2beta1) always elects a leader (a Lease in --lock-namespace: kube-system,
    never wiped) and serves /healthz on a port hard-coded to 8080 upstream: kube-env adds one file at
    build time (HEALTH_PORT_FILE, to a copy of the module; no upstream line changes) so that the
    port comes from KUBE_ENV_HEALTH_PORT and two clusters' operators do not collide. No webhooks."""
    return [str(run.binary), f"--kubeConfig={run.kubeconfig}", "--lock-namespace=kube-system", "--threadiness=2",
            "--kube-api-qps=50", "--kube-api-burst=100"]


HEALTH_PORT_FILE = (
    "cmd/mpi-operator/app/zz_kube_env_health_port.go",
    "package app\n\nimport (\n\t\"os\"\n\t\"strconv\"\n)\n\n"
    "// Added by placer's hack/kube-env at build time (to a copy of the module): the health server's port\n"
    "// (healthCheckPort, 8080 upstream) from KUBE_ENV_HEALTH_PORT when set.\n"
    "func init() {\n\tif p, err := strconv.Atoi(os.Getenv(\"KUBE_ENV_HEALTH_PORT\")); err == nil {\n"
    "\t\thealthCheckPort = p\n\t}\n}\n")


RECIPES: dict[str, Recipe] = {
    KWOK: Recipe("cmd/kwok", 4),
    "jobset": Recipe("", 4, crds=("config/components/crd/bases/*.yaml",), webhooks="config/components/webhook",
                     command=kubebuilder_command("config.jobset.x-k8s.io/v1alpha1")),
    "lws": Recipe("cmd", 10, crds=("config/crd/bases/*.yaml",), webhooks="config/webhook",
                  command=kubebuilder_command("config.lws.x-k8s.io/v1alpha1")),
    "kuberay": Recipe("", 6, crds=("config/crd/bases/*.yaml",), command=kuberay_command),
    "kueue": Recipe("cmd/kueue", 15, crds=("config/components/crd/bases/*.yaml",),
                    webhooks="config/components/webhook", command=lambda run: kueue.command(run),
                    namespace=kueue.NAMESPACE, on_hub=True, peer=True),
    "training-operator": Recipe(
        "cmd/training-operator.v1", 6,
        crds=tuple(f"manifests/base/crds/kubeflow.org_{k}s.yaml" for k in TRAINING_KINDS),
        webhooks="manifests/base/webhook", command=training_operator_command,
        environ=lambda run: {"TMPDIR": str(run.home / "tmp"), "MY_POD_NAMESPACE": TRAINING_NAMESPACE},
        objects=({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                  "metadata": {"name": "training-operator-webhook-cert", "namespace": TRAINING_NAMESPACE}},)),
    "mpi-operator": Recipe(
        "cmd/mpi-operator", 5, crds=("manifests/base/kubeflow.org_mpijobs.yaml",), command=mpi_operator_command,
        ready_path="/healthz",  # KUBECONFIG, when set, overrides its --kubeConfig: set to the same
        environ=lambda run: {"KUBE_ENV_HEALTH_PORT": str(run.health_port), "KUBECONFIG": str(run.kubeconfig)},
        added=(HEALTH_PORT_FILE,)),
}
OPERATORS = tuple(n for n in RECIPES if n != KWOK)
WORKLOAD_OPERATORS = tuple(n for n in OPERATORS if not RECIPES[n].peer)   # `--operators all`


# --- pins ----------------------------------------------------------------------------

def pins_path() -> Path:
    return Path(os.environ.get("KUBE_ENV_OPERATORS_RELEASE") or HACK / "operators-release")


def pins() -> dict[str, Pin]:
    out = {}
    for line in pins_path().read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, module, version = line.split()
            out[name] = Pin(name, module, version)
    return out


def pin(name: str) -> Pin:
    known = pins()
    if name not in known or name not in RECIPES:
        raise Fail(f"unknown operator {name!r} (known: {', '.join(OPERATORS)})", 2)
    return known[name]


def parse_operators(text: str) -> list[str]:
    """--operators LIST|all: known names, in the order given, each once (`all`: the workload
    operators; a peer scheduler such as Kueue is asked for by name)."""
    names = list(WORKLOAD_OPERATORS) if text == "all" else [n.strip() for n in text.split(",") if n.strip()]
    for name in names:
        if name == KWOK or name not in RECIPES:
            raise Fail(f"--operators: unknown operator {name!r} (known: {', '.join(OPERATORS)} or all)", 2)
        pin(name)
    return list(dict.fromkeys(names))


# --- build -----------------------------------------------------------------------------

def cached(name: str) -> Path:
    p = pin(name)
    return cache_root() / "operators" / f"{name}-{p.version}"


def binary(name: str) -> Path:
    return cached(name) / name


def present(name: str) -> bool:
    return (cached(name) / "done").exists()


def module_dir(p: Pin) -> Path:
    """The module's source in Go's module cache (downloaded from the proxy when absent)."""
    proc = subprocess.run(["go", "mod", "download", "-json", f"{p.module}@{p.version}"], cwd=tempfile.gettempdir(),
                          env=go_env(), capture_output=True, text=True)
    try:
        info = json.loads(proc.stdout or "{}")
    except ValueError:
        info = {}
    if proc.returncode != 0 or not info.get("Dir"):
        why = (info.get("Error") or proc.stderr.strip() or "no answer").splitlines()[-1]
        raise Fail(f"operator {p.name}: module {p.module}@{p.version} is not served: {why}")
    return Path(info["Dir"])


def module_path(name: str) -> Path:
    return HACK / "operators" / name


def module_pinned(p: Pin) -> bool:
    gomod = module_path(p.name) / "go.mod"
    text = gomod.read_text() if gomod.exists() else ""
    return re.search(rf"^\s*(require\s+)?{re.escape(p.module)} {re.escape(p.version)}\s*$", text, re.M) is not None


def write_module(p: Pin) -> None:
    """hack/operators/<name>/go.mod requiring only the pinned module: Go's MVS then picks exactly the
    versions the operator's own go.mod asks for (none of these modules has replace directives)."""
    d = module_path(p.name)
    d.mkdir(parents=True, exist_ok=True)
    (d / "go.mod").write_text(
        "// Generated by `hack/kube-env build --update` from hack/operators-release: do not edit.\n"
        f"module placer.dev/operators/{p.name}\n\ngo 1.26.0\n\nrequire (\n\t{p.module} {p.version}\n)\n")
    (d / "go.sum").write_text("")
    go("get", f"{package(p)}@{p.version}", cwd=d)


def package(p: Pin) -> str:
    sub = RECIPES[p.name].package
    return f"{p.module}/{sub}" if sub else p.module


def ensure(name: str, kubectl: Path, update: bool = False) -> Path:
    """The operator's cache directory (binary, crds.json, webhooks.json), built when absent."""
    if present(name) and not update:
        return cached(name)
    p, out = pin(name), cached(name)
    if shutil.which("go") is None:
        raise Fail(f"no Go on PATH: needed once to build {name} {p.version} into {out}")
    out.parent.mkdir(parents=True, exist_ok=True)
    # one lock per version: another version's cold build (a pin under test) is not waited for
    with locked(out.parent / f".{out.name}.lock"):
        if present(name) and not update:
            return out  # another process built it while we waited
        source = module_dir(p)
        if update or not module_pinned(p):
            if not update:
                raise Fail(f"hack/operators/{name}/go.mod is not at {p.module} {p.version} "
                           f"({pins_path().name}): run hack/kube-env build --update")
            write_module(p)
        build_into(p, source, out, kubectl)
    return out


def build_into(p: Pin, source: Path, out: Path, kubectl: Path) -> None:
    recipe = RECIPES[p.name]
    print(f"kube-env: building {p.name} {p.version} ({p.module}) into {out} "
          f"(a cold build takes about {recipe.minutes} min)", file=sys.stderr, flush=True)
    started = time.monotonic()
    staging = Path(tempfile.mkdtemp(prefix=f"{p.name}-", dir=out.parent))
    try:
        work = Path(tempfile.mkdtemp(prefix=f"{p.name}-src-", dir=out.parent))
        try:
            go("build", "-trimpath", "-ldflags", "-s -w", *added_files(p, recipe, source, work), "-o",
               str(staging / p.name), package(p), cwd=module_path(p.name))
        finally:
            shutil.rmtree(work, ignore_errors=True)
        crds = [f for pattern in recipe.crds for f in sorted(source.glob(pattern))]
        write(staging / "crds.json",
              [o for o in render(kubectl, crds, p) if o.get("kind") == "CustomResourceDefinition"])
        write(staging / "webhooks.json", webhook_manifests(kubectl, source, recipe, p))
        (staging / "done").write_text(f"{p.module} {p.version}\n")
        staging.chmod(0o755)  # mkdtemp's 0700 would hide the cache from other users
        shutil.rmtree(out, ignore_errors=True)
        os.replace(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    print(f"kube-env: built {p.name} in {time.monotonic() - started:.0f}s", file=sys.stderr, flush=True)


def added_files(p: Pin, recipe: Recipe, source: Path, work: Path) -> list[str]:
    """The recipe's added files: the module copied to `work` with them beside its own (none of
    which changes), and go flags building against that copy (-modfile: a copy of
    hack/operators/<name>/go.mod replacing the module with it; Go refuses an -overlay of files
    in its module cache)."""
    if not recipe.added:
        return []
    copy = work / "module"
    shutil.copytree(source, copy, copy_function=shutil.copyfile)
    for d, _, _ in os.walk(copy):
        os.chmod(d, 0o755)                 # the module cache's directories are read-only
    for path, text in recipe.added:
        if (copy / path).exists():
            raise Fail(f"operator {p.name}: {path} exists upstream: kube-env's added file would replace it")
        (copy / path).write_text(text)
    gomod = module_path(p.name) / "go.mod"
    (work / "go.mod").write_text(gomod.read_text() + f"\nreplace {p.module} => {copy}\n")
    shutil.copyfile(gomod.with_suffix(".sum"), work / "go.sum")
    return [f"-modfile={work / 'go.mod'}"]


def write(path: Path, data) -> None:
    path.write_text(json.dumps(data) + "\n")


def webhook_manifests(kubectl: Path, source: Path, recipe: Recipe, p: Pin) -> list[dict]:
    if not recipe.webhooks:
        return []
    proc = subprocess.run([str(kubectl), "kustomize", str(source / recipe.webhooks)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise Fail(f"operator {p.name}: kubectl kustomize {recipe.webhooks}: {proc.stderr.strip()[-300:]}")
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        f.write(proc.stdout)
        f.flush()
        return [o for o in render(kubectl, [Path(f.name)], p) if o.get("kind") in WEBHOOK_KINDS]


WEBHOOK_KINDS = {"MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
                 "ValidatingWebhookConfiguration": "validatingwebhookconfigurations"}


def render(kubectl: Path, files: list[Path], p: Pin) -> list[dict]:
    """YAML files as JSON objects, annotated with their source (kubectl works offline with --local:
    kube-env has no YAML parser of its own)."""
    if not files:
        return []
    args = [str(kubectl), "annotate", "--local", "--overwrite", "-o", "json",
            *(a for f in files for a in ("-f", str(f))), f"{SOURCE}={p.module}@{p.version}"]
    proc = subprocess.run(args, capture_output=True, text=True, env={**os.environ, "KUBECONFIG": os.devnull})
    if proc.returncode != 0:
        raise Fail(f"operator {p.name}: reading {files[0].name}: {proc.stderr.strip()[-300:]}")
    return concatenated_json(proc.stdout)


def concatenated_json(text: str) -> list[dict]:
    """kubectl -o json prints one document per object, back to back."""
    decoder, out, i = json.JSONDecoder(), [], 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            return out
        obj, i = decoder.raw_decode(text, i)
        out.extend(obj.get("items", []) if obj.get("kind") == "List" else [obj])


# --- install and register -----------------------------------------------------------------

Api = Callable[..., object]  # Env.request bound to one cluster: (method, path, body=None, ctype=...)
APPLY = "application/apply-patch+yaml"
QUERY = "?fieldManager=kube-env&force=true"


def apply(api: Api, path: str, obj: dict, attempts: int = 5) -> None:
    """Server-side apply (idempotent): sent again when no answer came in time, as a machine loaded
    by a dozen API servers can be that slow (an HTTP error is an answer, and is raised)."""
    for attempt in range(1, attempts + 1):
        try:
            api("PATCH", path + QUERY, obj, APPLY, timeout=60.0)
            return
        except urllib.error.HTTPError:
            raise
        except (OSError, urllib.error.URLError) as e:
            if attempt == attempts:
                raise Fail(f"applying {path}: no answer after {attempts} attempts ({e})") from None
            time.sleep(attempt)


def install_crds(api: Api, name: str) -> list[str]:
    crds = json.loads((cached(name) / "crds.json").read_text())
    for crd in crds:
        apply(api, f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}", crd)
    return [c["metadata"]["name"] for c in crds]


def apply_objects(api: Api, name: str) -> None:
    """What the operator insists on finding before it starts (namespaced objects, in a namespace that exists)."""
    for obj in RECIPES[name].objects:
        group, version = (obj["apiVersion"].split("/") if "/" in obj["apiVersion"] else ("", obj["apiVersion"]))
        base = f"/apis/{group}/{version}" if group else f"/api/{version}"
        plural = obj["kind"].lower() + "s"
        meta = obj["metadata"]
        apply(api, f"{base}/namespaces/{meta['namespace']}/{plural}/{meta['name']}", obj)


def established(api: Api, crd: str) -> bool:
    obj = api("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}")
    return any(c.get("type") == "Established" and c.get("status") == "True"
               for c in (obj.get("status") or {}).get("conditions") or ())  # type: ignore[union-attr]


def webhook_configurations(name: str, configs: list[dict], port: int, ca_bundle: bytes) -> list[dict]:
    """The module's webhook configurations, pointed at the operator on 127.0.0.1:port (a URL client
    config: there is no Service network here) and trusting kube-env's CA; renamed per operator."""
    out = []
    for config in configs:
        c = json.loads(json.dumps(config))
        c["metadata"] = {"name": f"kube-env-{name}-{c['metadata']['name']}",
                         "annotations": (c["metadata"].get("annotations") or {})}
        for hook in c.get("webhooks") or ():
            path = ((hook.get("clientConfig") or {}).get("service") or {}).get("path") or "/"
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}",
                                    "caBundle": base64.b64encode(ca_bundle).decode()}
        out.append(c)
    return out


def register_webhooks(api: Api, name: str, port: int, ca_bundle: bytes) -> None:
    configs = json.loads((cached(name) / "webhooks.json").read_text())
    for c in webhook_configurations(name, configs, port, ca_bundle):
        plural = WEBHOOK_KINDS[c["kind"]]
        apply(api, f"/apis/admissionregistration.k8s.io/v1/{plural}/{c['metadata']['name']}", c)


def healthy(port: int, name: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{RECIPES[name].ready_path}", timeout=2) as resp:
            return resp.status == 200
    except (OSError, urllib.error.URLError):
        return False
