"""The kubeconfig: one or several files (as `KUBECONFIG` allows), its contexts, and the
client library's configuration for any of them."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import yaml

from placer.model.errors import InputError

if TYPE_CHECKING:
    from kubernetes import client as k8s_client


def _library() -> tuple[Any, Any, type[Exception]]:
    """The client library's configuration and kubeconfig loader, imported when a kubeconfig
    is read (issue 24: `placer plan` of files on simulated clusters reads none, and the
    library costs about 0.2 s to import)."""
    from kubernetes import client
    from kubernetes.config import kube_config
    from kubernetes.config.config_exception import ConfigException
    return client, kube_config, ConfigException


def kubeconfig_paths(kubeconfig: str | None = None) -> str:
    """The kubeconfig location as the client library takes it: `--kubeconfig`, else
    `KUBECONFIG` (several files separated by `:`, merged), else ~/.kube/config."""
    return kubeconfig or os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")


def kubeconfig_origin(kubeconfig: str | None = None) -> str:
    """Where the kubeconfig location came from, as the user wrote it: `--kubeconfig`,
    `$KUBECONFIG`, or the default `~/.kube/config`."""
    if kubeconfig:
        return "--kubeconfig"
    return "$KUBECONFIG" if os.environ.get("KUBECONFIG") else "default"


def kubeconfig_exists(kubeconfig: str | None = None) -> bool:
    """Whether a kubeconfig is asked for at all: `--kubeconfig` or `$KUBECONFIG` given (even
    naming a file that is missing: that is an error, never "no kubeconfig"), or the default
    ~/.kube/config present."""
    return kubeconfig_origin(kubeconfig) != "default" or os.path.exists(kubeconfig_paths(None))


def check_files(kubeconfig: str | None = None) -> None:
    """Every file of the kubeconfig location exists and is readable; the first that is not
    is bad input naming it and where it came from. Stricter than kubectl, which skips a
    missing file in `$KUBECONFIG`: a typo there must not leave a context silently unknown."""
    origin = kubeconfig_origin(kubeconfig)
    paths = [p for p in kubeconfig_paths(kubeconfig).split(os.pathsep) if p]
    if not paths:
        raise InputError(f"kubeconfig: {origin} names no file")
    for path in paths:
        since = "" if origin == "default" else f" (from {origin})"
        try:
            with open(os.path.expanduser(path), "rb"):
                pass
        except IsADirectoryError:
            raise InputError(f"cannot read kubeconfig: is a directory, not a file{since}", source=path) from None
        except OSError as e:
            why = (e.strerror or str(e)).lower()
            raise InputError(f"cannot read kubeconfig: {why}{since}", source=path) from None


def list_contexts(kubeconfig: str | None = None) -> tuple[list[str], str | None]:
    """All context names and the current one."""
    return KubeConfig(kubeconfig).contexts()


class KubeConfig:
    """The merged kubeconfig, read once (parsing YAML per client is costly with many
    contexts); builds the library's client configuration for any of its contexts."""

    def __init__(self, kubeconfig: str | None = None):
        self.path = kubeconfig_paths(kubeconfig)
        self.origin = kubeconfig_origin(kubeconfig)
        check_files(kubeconfig)
        _, kube_config, ConfigException = _library()
        try:
            self._merged = kube_config.KubeConfigMerger(self.path)
            if self._merged.config is None:
                raise ConfigException("no kubeconfig file found")
            loader = self._loader(None)
            self._contexts = [c["name"] for c in loader.list_contexts()]
            current = loader.current_context
        except (ConfigException, OSError, ValueError, yaml.YAMLError) as e:
            text = " ".join(str(e).split())          # YAML errors span lines: one line for the user
            raise InputError(f"cannot read kubeconfig: {text}", source=self.path) from None
        self._current = _first_current_context(self.path) or (current or {}).get("name")

    def _loader(self, context: str | None):
        return _library()[1].KubeConfigLoader(config_dict=self._merged.config, config_base_path=None,
                                                active_context=context)

    def contexts(self) -> tuple[list[str], str | None]:
        return list(self._contexts), self._current

    def configure(self, context: str) -> tuple["k8s_client.Configuration", str]:
        """The client configuration for `context`, and the context's default namespace."""
        if context not in self._contexts:
            raise InputError(f"context {context!r} not found (known: {', '.join(self._contexts) or 'none'})",
                             source=self.path)
        client, _, ConfigException = _library()
        configuration = type.__call__(client.Configuration)
        try:
            loader = self._loader(context)
            loader.load_and_set(configuration)
        except (ConfigException, OSError, ValueError) as e:
            raise InputError(f"context {context}: {e}", source=self.path) from None
        namespace = (loader.current_context.get("context") or {}).get("namespace") or "default"
        return configuration, namespace


def _first_current_context(paths: str) -> str | None:
    """kubectl's rule: the first file that sets current-context wins (the client
    library lets the last one win)."""
    for path in paths.split(os.pathsep):
        path = os.path.expanduser(path)
        if not path or not os.path.exists(path):
            continue
        try:
            with open(path) as f:
                current = (yaml.safe_load(f) or {}).get("current-context")
        except (OSError, yaml.YAMLError):
            continue
        if current:
            return current
    return None

