"""Kubernetes Pod Security Standards (baseline and restricted), checked by placer before it
creates anything, so that write access to a staging namespace is not a way to run
privileged pods on every target cluster.

placer labels each namespace it creates with the cluster's level (enforced by the
cluster's own PodSecurity admission), and refuses, with the reason, a workload whose pod
specs the level forbids: the cluster would reject its pods anyway, after placer had
promised their capacity. Pod specs are found wherever an object embeds them (any map
with a `containers` list), not only where a definition says, since what matters here is
what the cluster will run.
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping

LABEL = "pod-security.kubernetes.io/enforce"
VERSION_LABEL = "pod-security.kubernetes.io/enforce-version"

_BASELINE_CAPS = frozenset({"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                            "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"})
_SAFE_SYSCTLS = frozenset({"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range",
                           "net.ipv4.ip_unprivileged_port_start", "net.ipv4.tcp_syncookies",
                           "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
                           "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout",
                           "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes"})
_SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})
_RESTRICTED_VOLUMES = frozenset({"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                                 "persistentVolumeClaim", "projected", "secret"})
_CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


def pod_specs(obj: Any, path: str = "") -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every embedded pod spec (a map with a `containers` list), with its path."""
    stack: list[tuple[Any, str]] = [(obj, path)]
    while stack:
        value, at = stack.pop()
        if isinstance(value, dict):
            if isinstance(value.get("containers"), list):
                yield at or ".", value
            stack.extend((v, f"{at}.{k}") for k, v in reversed(list(value.items())) if isinstance(v, (dict, list)))
        elif isinstance(value, list):
            stack.extend((v, f"{at}[{i}]") for i, v in reversed(list(enumerate(value))) if isinstance(v, (dict, list)))


def violations(spec: Mapping[str, Any], level: str) -> list[str]:
    """What `level` forbids in one pod spec, in the standard's own words (empty: allowed)."""
    if level == "privileged":
        return []
    found = _baseline(spec)
    if level == "restricted":
        found += _restricted(spec)
    return found


def _containers(spec: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    for key in _CONTAINER_LISTS:
        for c in spec.get(key) or ():
            if isinstance(c, dict):
                yield f"{key}[{c.get('name') or '?'}]", c


def _sc(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    sc = obj.get("securityContext")
    return sc if isinstance(sc, dict) else {}


def _baseline(spec: Mapping[str, Any]) -> list[str]:
    out = [f"host namespaces ({k}: true)" for k in ("hostNetwork", "hostPID", "hostIPC") if spec.get(k) is True]
    out += [f"hostPath volume {v.get('name')!r}" for v in spec.get("volumes") or ()
            if isinstance(v, dict) and v.get("hostPath") is not None]
    pod_sc = _sc(spec)
    out += _context_problems("pod", pod_sc)
    for sysctl in pod_sc.get("sysctls") or ():
        name = sysctl.get("name") if isinstance(sysctl, dict) else sysctl
        if name not in _SAFE_SYSCTLS:
            out.append(f"unsafe sysctl {name!r}")
    for where, c in _containers(spec):
        sc = _sc(c)
        if sc.get("privileged") is True:
            out.append(f"{where}: privileged")
        added = set(((sc.get("capabilities") or {}).get("add")) or ()) - _BASELINE_CAPS
        if added:
            out.append(f"{where}: capabilities added beyond baseline ({', '.join(sorted(map(str, added)))})")
        if sc.get("procMount") not in (None, "Default"):
            out.append(f"{where}: procMount {sc['procMount']!r}")
        out += _context_problems(where, sc)
        out += [f"{where}: hostPort {p['hostPort']}" for p in c.get("ports") or ()
                if isinstance(p, dict) and p.get("hostPort")]
    return out


def _context_problems(where: str, sc: Mapping[str, Any]) -> list[str]:
    out = []
    if (sc.get("windowsOptions") or {}).get("hostProcess") is True:
        out.append(f"{where}: windowsOptions.hostProcess")
    if (sc.get("seccompProfile") or {}).get("type") == "Unconfined":
        out.append(f"{where}: seccompProfile Unconfined")
    if (sc.get("appArmorProfile") or {}).get("type") == "Unconfined":
        out.append(f"{where}: appArmorProfile Unconfined")
    selinux = sc.get("seLinuxOptions") or {}
    if selinux.get("type", "") not in _SELINUX_TYPES or selinux.get("user") or selinux.get("role"):
        out.append(f"{where}: seLinuxOptions {dict(selinux)}")
    return out


def _restricted(spec: Mapping[str, Any]) -> list[str]:
    out = []
    for v in spec.get("volumes") or ():
        if isinstance(v, dict):
            kinds = [k for k in v if k != "name"]
            if kinds and not set(kinds) <= _RESTRICTED_VOLUMES and v.get("hostPath") is None:
                out.append(f"volume {v.get('name')!r} of type {', '.join(kinds)}")
    pod_sc = _sc(spec)
    if pod_sc.get("runAsUser") == 0:
        out.append("pod: runAsUser 0")
    for where, c in _containers(spec):
        sc = _sc(c)
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"{where}: allowPrivilegeEscalation is not false")
        if not (sc.get("runAsNonRoot") is True or (pod_sc.get("runAsNonRoot") is True
                                                   and sc.get("runAsNonRoot") is not False)):
            out.append(f"{where}: runAsNonRoot is not true")
        if sc.get("runAsUser") == 0:
            out.append(f"{where}: runAsUser 0")
        profile = (sc.get("seccompProfile") or pod_sc.get("seccompProfile") or {}).get("type")
        if profile not in ("RuntimeDefault", "Localhost"):
            out.append(f"{where}: seccompProfile is not RuntimeDefault or Localhost")
        caps = sc.get("capabilities") or {}
        if "ALL" not in (caps.get("drop") or ()):
            out.append(f"{where}: capabilities do not drop ALL")
        extra = set(caps.get("add") or ()) - {"NET_BIND_SERVICE"}
        if extra and not (extra - _BASELINE_CAPS):      # beyond baseline is reported there already
            out.append(f"{where}: capabilities added beyond NET_BIND_SERVICE ({', '.join(sorted(extra))})")
    return out


def object_violations(obj: Mapping[str, Any], level: str) -> list[str]:
    """Every violation of `level` in every pod spec `obj` embeds, each with its path."""
    return [f"{path}: {problem}" for path, spec in pod_specs(obj) for problem in violations(spec, level)]
