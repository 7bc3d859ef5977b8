# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: which runtime(s) a verdict speaks for. Not public API.

The inspect stage (host, cdi) selects the runtimes and judges their CDI configuration: this module and the discovery
it uses (``layouts``, ``kubelet``, ``daemons``, ``systemd``, ``nodefs``, ``docker_context``, ``why``) import none of
the probe's code (a module's imports are shipped and compiled on the node).

``runtime: auto`` takes the runtime the node's Pods use (``_runtime.layouts.discover``, the running system first):

1. a kubelet runs or is installed (the running kubelet, ``hyperkube kubelet`` or MicroK8s' ``kubelite`` in /proc;
   the kubelet inside ``k3s``/``rke2 server|agent``; else the ``kubelet.service`` unit with its drop-ins and
   environment files, kubeadm's files, k3s/RKE2's configuration, MicroK8s' args): the CRI endpoint that kubelet
   uses, in the kubelet's own precedence (the ``--container-runtime-endpoint`` flag, over the ``--config-dir``
   drop-ins, over the ``--config`` file, over the KubeletConfiguration default
   ``unix:///run/containerd/containerd.sock``). Where a file of that chain cannot be read here (a 0600 ``--config``,
   the collection unprivileged), the endpoint is unknown: no runtime is selected (name None, the reason says so),
   never the default's daemon in its place. The endpoint is compared with the running containerd and CRI-O
   processes by socket identity (``nodefs.same_socket``): the daemon serving it is named, and the others that run
   are said. Which engine serves it is what the CRI ``Version`` call answers, not the socket's name;
2. else a running docker daemon (``docker info`` answers at the endpoint the docker CLI really uses:
   ``DOCKER_HOST``, else its current context, ``_runtime.docker_context``; a context that is not a local unix
   socket is refused, never asked), whatever its CDI state: a docker host's workloads run through docker, so CDI
   off there is a cdi FAIL for docker, not a reason to verify another engine. Where that endpoint does not answer
   (a context at a dead socket) while a dockerd runs, the daemon is asked where it listens (its ``-H`` socket, else
   the docker.sock it holds open): still docker, never podman;
3. else podman.

A list of names verifies through each of them (per-runtime records); ``auto`` cannot be part of a list. Every
selected engine's dict says why it was chosen in one sentence (``selected_because``, ``_runtime.why``; the kubelet's
path also as ``selection``); the cdi layer adds which CDI library the compat table gives its release
(``_cdi.engine.describe``).
"""

from __future__ import annotations

import os
import re
import json

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.run import first_line, last_line, run, which
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.vocab import CRI_ENGINES, ENGINES
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import docker_context, nodefs, why
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.layouts import discover
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import layouts as _layouts
# the runtime's own socket when neither the option nor CONTAINER_RUNTIME_ENDPOINT names one (the kubelet's defaults)
DEFAULT_ENDPOINTS = {"containerd": "unix:///run/containerd/containerd.sock", "crio": "unix:///var/run/crio/crio.sock"}
ENDPOINT_ENV = "CONTAINER_RUNTIME_ENDPOINT"
# CRI Version.runtime_name -> engine
CRI_RUNTIME_NAMES = {"containerd": "containerd", "cri-o": "crio", "crio": "crio"}
VERSION_RE = re.compile(r"^v?\d+(\.\d+){0,3}([-+~][0-9A-Za-z.+~-]*)?$")


def error_line(text):
    """The runtime's own error line (the last 'Error: ...' line, else the last non-empty line)."""
    errors = [line.strip() for line in (text or "").splitlines() if line.strip().startswith("Error") or "error" in line.lower()]
    return (errors[-1] if errors else last_line(text))[:1000]


def parse_runtime_option(value):
    """The runtime option as a list of engine names, or ["auto"]. ValueError with one clear message for an unknown
    name, an empty list, duplicates, or 'auto' inside a list."""
    if value is None or value == "":
        return ["auto"]
    if isinstance(value, str):
        names = [v.strip() for v in value.split(",")] if "," in value else [value.strip()]
    elif isinstance(value, (list, tuple)):
        names = [str(v).strip() if isinstance(v, str) else v for v in value]
    else:
        raise ValueError("runtime must be 'auto', an engine name or a list of engine names (%s), got %r" % (
            ", ".join(ENGINES), value))
    if not names:
        raise ValueError("runtime is an empty list: name at least one engine (%s), or use 'auto'" % ", ".join(ENGINES))
    unknown = [n for n in names if n not in ENGINES and n != "auto"]
    if unknown:
        raise ValueError("runtime: unknown engine name(s) %s; known: auto, %s" % (
            ", ".join(repr(u) for u in unknown), ", ".join(ENGINES)))
    if "auto" in names and len(names) > 1:
        raise ValueError("runtime: 'auto' picks one engine and cannot be combined with names (got %s)" % ", ".join(names))
    dups = sorted(set(n for n in names if names.count(n) > 1))
    if dups:
        raise ValueError("runtime: %s named more than once" % ", ".join(dups))
    return names


def check_endpoint(endpoint):
    """None, or a ``unix:///absolute/path`` CRI endpoint (ValueError otherwise)."""
    if endpoint in (None, ""):
        return None
    text = str(endpoint)
    if not text.startswith("unix://") or not text[len("unix://"):].startswith("/"):
        raise ValueError("runtime_endpoint %r: only unix:///absolute/path.sock CRI endpoints are supported" % (text,))
    return text


def distribution(root="/", procs=None):
    """(name, evidence) of the distribution here (k3s, rke2, microk8s, or None): ``_runtime.layouts.distribution``,
    through this door for the k8s layer (the admin kubeconfig it writes, its kubectl)."""
    return _layouts.distribution(root, procs)


def kubelet_endpoint(root="/", procs=None):
    """Whether a kubelet runs or is installed and the CRI endpoint it uses (``_runtime.layouts.discover``): dict
    installed (bool), evidence (what showed it), endpoint, source (where the endpoint comes from), errors, and the
    discovery's layout, kubelet, socket, daemons, serving, notes."""
    return discover(root, which_kubelet=which("kubelet") if root in ("", "/") else None, procs=procs)


# ---- the CLI engines' detection (the inspect stage runs it: here, not in the _runtime package) ----------

PODMAN_NOT_ASKED = ("podman info not run in the inspect stage (its version is from podman --version); podman info (OCI "
                    "runtime, cgroups, whether podman answers) runs in the probe stage, before the probe container")


def cli_info(name, timeout=30, endpoint=None, inspect=False, root="/", environ=None):
    """The detection dict of a CLI engine (podman, docker) found on PATH; docker's ``endpoint``: its daemon's socket,
    else the endpoint the docker CLI really uses (``_runtime.docker_context``: DOCKER_HOST, else its current context;
    ``root``, ``environ``: where its configuration is read). ``inspect``: for the inspect stage, which needs podman's
    version only (the CDI library its release vendors, its containers.conf): ``podman --version``, not ``podman info``
    (0.3-0.5 s; docs/performance.md), and ``usable`` None, so that the probe stage detects it in full before starting a
    container."""
    path = which(name)
    if not path:
        return {"name": name, "usable": False, "path": None, "reason": "%s not found" % name}
    if name == "podman":
        return _podman_version(path, timeout) if inspect else _podman_info(path, timeout)
    return _docker_info(path, timeout, endpoint, root, environ)


def _podman_version(path, timeout):
    r = run([path, "--version"], timeout=timeout)
    text = first_line(r["stdout"])
    if r["rc"] != 0:
        return {"name": "podman", "path": path, "usable": False,
                "reason": "podman --version failed: %s" % (error_line(r["stderr"]) or r["error"])}
    return {"name": "podman", "path": path, "usable": None, "reason": PODMAN_NOT_ASKED,
            "version": version_or_unknown(text[len("podman version "):] if text.startswith("podman version ") else text),
            "version_text": text[:200], "cdi": "native (--device vendor/class=name)"}


def version_or_unknown(text):
    """A runtime's version string as it said it, when it looks like one (4.3.1, 24.0.7, v1.1.5, 4.9.3-dev), else
    "unknown" (the record keeps what can be shown; _cdi.compat.parse_version reads a version into numbers)."""
    text = str(text or "").strip()
    return text if VERSION_RE.match(text) else "unknown"


def _podman_info(path, timeout):
    r = run([path, "info", "--format",
             "{{.Version.Version}}|{{.Host.OCIRuntime.Name}}|{{.Host.OCIRuntime.Version}}|{{.Host.CgroupsVersion}}"],
            timeout=timeout)
    if r["rc"] != 0:
        return {"name": "podman", "path": path, "usable": False,
                "reason": "podman info failed: %s" % (error_line(r["stderr"]) or r["error"])}
    parts = r["stdout"].strip().split("|")
    while len(parts) < 4:
        parts.append("")
    return {"name": "podman", "path": path, "usable": True, "reason": None, "version": version_or_unknown(parts[0]),
            "version_text": parts[0][:200],
            "oci_runtime": "%s %s" % (parts[1], first_line(parts[2]).replace("%s version " % parts[1], "")),
            "cgroups": parts[3], "cdi": "native (--device vendor/class=name)"}


def _env(info):
    """The environment of an engine's CLI: this process's, with the engine's own socket (docker: DOCKER_HOST)."""
    return dict(os.environ, **info["env"]) if info.get("env") else None


def _docker_info(path, timeout, endpoint=None, root="/", environ=None):
    """docker's detection through ``docker info``, at ``endpoint`` (given), else at the endpoint the docker CLI really
    uses, pinned as DOCKER_HOST for this call and for every later docker call of the run (``env``). A context that is
    not a local unix socket is refused: ``docker info`` is not run (usable False, ``refused`` says why)."""
    if endpoint:
        ctx = {"endpoint": endpoint, "context": None, "source": "the endpoint given", "refused": None}
    else:
        ctx = docker_context.resolve(environ, root)
    where = {"endpoint": ctx["endpoint"], "env": {"DOCKER_HOST": ctx["endpoint"]} if ctx["endpoint"] else {},
             "docker_context": ctx.get("context"), "endpoint_source": ctx.get("source")}
    if ctx.get("refused"):
        return dict(where, name="docker", path=path, usable=False, daemon_running=None, refused=ctx["refused"],
                    reason=ctx["refused"])
    env = where["env"]
    r = run([path, "info", "--format", "{{json .}}"], timeout=timeout, env=_env(where))
    if r["rc"] != 0:
        return dict(where, name="docker", path=path, usable=False, daemon_running=False,
                    reason="docker info failed: %s" % (error_line(r["stderr"]) or r["error"]))
    try:
        info = json.loads(r["stdout"])
    except ValueError:
        info = {}
    info = info if isinstance(info, dict) else {}
    if info.get("ServerErrors") or not info.get("ServerVersion"):
        # docker 26 prints its client's info and exits 0 when no daemon answers: the daemon's errors say it
        errors = [str(e) for e in info.get("ServerErrors") or []]
        return dict(where, name="docker", path=path, usable=False, daemon_running=False,
                    reason="docker info failed: %s" % ((errors[:1] or [error_line(r["stderr"])])[0] or "no server version in its answer"))
    spec_dirs = info.get("CDISpecDirs")
    base = {"name": "docker", "path": path, "endpoint": where["endpoint"], "env": env, "daemon_running": True,
            "docker_context": where["docker_context"], "endpoint_source": where["endpoint_source"],
            # what _cdi.engine.read_docker judges, from this same call: the daemon is not asked twice
            "daemon_info": dict(dict((k, info[k]) for k in ("ServerVersion", "CDISpecDirs", "DefaultRuntime") if k in info),
                                Runtimes=dict((n, {"path": (r or {}).get("path")}) for n, r in (info.get("Runtimes") or {}).items()
                                              if isinstance(r, dict))),
            "version": version_or_unknown(info.get("ServerVersion")),
            "version_text": str(info.get("ServerVersion"))[:200],
            "oci_runtime": info.get("DefaultRuntime"), "cgroups": info.get("CgroupVersion")}
    if not spec_dirs:
        base.update(usable=False, reason="docker %s has CDI disabled (no CDISpecDirs in docker info; enable "
                                         "features.cdi in daemon.json)" % info.get("ServerVersion"))
    else:
        base.update(usable=True, reason=None, cdi="CDISpecDirs %s" % ", ".join(spec_dirs))
    return base


def endpoint_of(name, endpoint=None):
    return endpoint or os.environ.get(ENDPOINT_ENV) or DEFAULT_ENDPOINTS[name]


def _socket_path(endpoint, cri):
    target = cri.endpoint_target(endpoint)
    return target[len("unix://"):] if target.startswith("unix://") else None


def _status_config(client, timeout, cri):
    """The runtime's own configuration as its verbose CRI Status gives it (containerd: info.config as JSON), or {}."""
    try:
        info = client.call("Status", {"verbose": True}, timeout).get("info") or {}
        return json.loads(info.get("config") or "{}")
    except (cri.CRIError, ValueError, TypeError):
        return {}


def cri_info(name, endpoint=None, timeout=30, descriptor=None):
    """Detection of a CRI runtime (``containerd`` or ``crio``) at ``endpoint``: dict name, endpoint, path (the same),
    descriptor, version (the CRI Version call's runtime_version), version_text, runtime_name, runtime_api_version,
    oci_runtime, cdi, usable, reason (why not usable). ``name`` is the engine the CRI Version call answers (asked_as:
    the name it was asked as, when that differs); an engine that is neither is not usable."""
    # imported here, and grpc only by _cri.load_libs(): only a CRI runtime needs them
    from ansible.module_utils.basic import missing_required_lib  # pylint: disable=import-outside-toplevel
    if name not in DEFAULT_ENDPOINTS:
        raise ValueError("%r is not a CRI runtime (%s)" % (name, ", ".join(sorted(DEFAULT_ENDPOINTS))))
    try:
        from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import cri_client as _cri  # pylint: disable=import-outside-toplevel
    except ImportError as exc:
        return {"name": name, "endpoint": endpoint_of(name, endpoint), "usable": False, "version": None,
                "reason": "the CRI client cannot be loaded: %s" % exc}
    endpoint = endpoint_of(name, endpoint)
    descriptor = descriptor or os.environ.get(_cri.DESCRIPTOR_ENV)
    info = {"name": name, "endpoint": endpoint, "path": endpoint, "descriptor": descriptor, "usable": False,
            "reason": None, "version": None}
    try:
        sock = _socket_path(endpoint, _cri)
    except ValueError as exc:
        info["reason"] = str(exc)
        return info
    if not _cri.load_libs():
        info["reason"] = "%s (%s)" % (missing_required_lib(_cri.CRI_LIBS, reason="the CRI (%s)" % name), _cri.CRI_IMPORT_ERROR)
        return info
    if sock and not os.path.exists(sock):
        info["reason"] = "%s: no CRI socket at %s" % (name, sock)
        return info
    try:
        client = _cri.CRIClient(endpoint, descriptor, timeout=timeout)
    except _cri.CRIUnavailable as exc:
        info["reason"] = "%s: %s (scripts/engines.sh stubs builds it on the controller; give its path on the node as " \
                         "cri_descriptor)" % (name, exc)
        return info
    try:
        v = client.version()
        config = _status_config(client, timeout, _cri)
    except _cri.CRIError as exc:
        info["reason"] = "%s: the CRI Version call at %s failed: %s" % (name, endpoint, exc)
        return info
    finally:
        client.close()
    said = CRI_RUNTIME_NAMES.get(str(v.get("runtime_name") or "").lower())
    info.update(version=version_or_unknown(v.get("runtime_version")), version_text=str(v.get("runtime_version"))[:200],
                runtime_name=v.get("runtime_name"), runtime_api_version=v.get("runtime_api_version"))
    if said is None:
        info["reason"] = "the CRI at %s is %s %s, neither containerd nor CRI-O" % (
            endpoint, v.get("runtime_name"), v.get("runtime_version"))
        return info
    if said != name:  # the engine is what the socket answers, not what it was asked as
        info.update(name=said, asked_as=name)
    runtimes = ((config.get("containerd") or {}).get("runtimes") or {})
    default = (config.get("containerd") or {}).get("defaultRuntimeName")
    if default in runtimes:
        opts = runtimes[default].get("options") or {}
        info["oci_runtime"] = "%s (%s%s)" % (default, runtimes[default].get("runtimeType") or "",
                                             ", %s" % opts["BinaryName"] if opts.get("BinaryName") else "")
    cdi = "CRI CDIDevices field and cdi.k8s.io/ annotations"
    if "enableCDI" in config:
        cdi += "; enable_cdi %s, cdi_spec_dirs %s" % (str(config["enableCDI"]).lower(), ", ".join(config.get("cdiSpecDirs") or []))
    info.update(usable=True, reason=None, cdi=cdi, sandbox_image=config.get("sandboxImage"))
    # what the running daemon does (the cdi layer judges it over the file: _cdi.engine_live), its CDI and handlers only
    from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.handler import trim_cri_config  # pylint: disable=import-outside-toplevel
    info["cri_config"] = trim_cri_config(config)
    return info


def _cri_info(name, endpoint, timeout, descriptor=None):
    """``cri_info``, with the engine behind the socket named from the CRI Version call's answer."""
    info = dict(cri_info(name, endpoint, timeout, descriptor))
    answered = CRI_RUNTIME_NAMES.get(str(info.get("runtime_name") or "").lower())
    if answered:
        info["name"] = answered
    info.setdefault("endpoint", endpoint)
    return info


def _guess_cri(endpoint):
    return "crio" if "crio" in os.path.basename(endpoint or "") else "containerd"


def engine_label(info):
    """'containerd 1.7.24 (unix:///run/containerd/containerd.sock)', 'podman 4.3.1 (/usr/bin/podman)'."""
    info = info or {}
    where = info.get("endpoint") or info.get("path")
    text = ("%s %s" % (info.get("name") or "no runtime", info.get("version") or "")).strip()
    return "%s (%s)" % (text, where) if where else text


def _describe(info, because):
    info = dict(info)
    info["selected_because"] = because
    return info


def _dial(endpoint, root):
    """The endpoint as this process reaches it: the node's own on /, else the socket's real path under the root."""
    path = nodefs.socket_path(endpoint)
    if root in ("", "/") or path is None:
        return endpoint
    return "unix://" + nodefs.resolve(root, path)[1]


def detect_one(name, timeout=30, endpoint=None, kubelet=None, descriptor=None, inspect=False, root="/"):
    """The detection dict of one named engine (not auto). CRI engines are reached at ``endpoint``, else the kubelet's
    endpoint when the engine serving it (or, none found, the socket's name) is this one, else the engine's default
    socket."""
    if name in CRI_ENGINES:
        if not endpoint and kubelet and kubelet.get("endpoint"):
            serving = (kubelet.get("serving") or {}).get("engine") or _guess_cri(kubelet["endpoint"])
            if serving == name:
                endpoint = _dial(kubelet["endpoint"], root)
                return dict(_cri_info(name, endpoint, timeout, descriptor), kubelet_pod=kubelet.get("pod"))
        # no endpoint: _runtime.cri reads CONTAINER_RUNTIME_ENDPOINT (crictl's variable), else the default socket
        return _cri_info(name, endpoint, timeout, descriptor)
    return cli_info(name, timeout=timeout, endpoint=endpoint if name == "docker" else None, inspect=inspect, root=root)


def _docker_because(docker):
    """'unix:///run/user/1000/docker.sock (context rootless (currentContext rootless in ...; ...))'."""
    where = docker.get("endpoint") or "no endpoint"
    return "%s (%s)" % (where, docker["endpoint_source"]) if docker.get("endpoint_source") else where


def dockerd_sockets(d):
    """The sockets a running dockerd serves its API on: its ``-H`` unix socket, else the sockets named docker.sock it
    listens on (its open sockets that /proc/net/unix names: a socket-activated ``fd://`` daemon's /run/docker.sock)."""
    if d.get("socket"):
        return [d["socket"]]
    return [s for s in d.get("listening") or [] if os.path.basename(s) == "docker.sock"]


def _running_dockerd(docker, local, no_kubelet, timeout, root):
    """docker, where the docker CLI's endpoint did not answer while a dockerd runs: that daemon asked where it listens
    (a docker host's workloads run through it, not through podman), else docker not usable with both reasons."""
    cli_said = "the docker CLI's endpoint %s did not answer (%s)" % (_docker_because(docker), docker.get("reason"))
    pids = ", ".join("pid %d" % d["pid"] for d in local)
    for d in local:
        for sock in dockerd_sockets(d):
            there = cli_info("docker", timeout=timeout, endpoint=_dial("unix://" + sock, root), root=root)
            if there.get("daemon_running"):
                there["cli_endpoint"] = {"endpoint": docker.get("endpoint"), "source": docker.get("endpoint_source"),
                                         "reason": docker.get("reason")}
                return _describe(there, "docker %s at unix://%s, the socket the running dockerd (pid %d) listens on; %s; %s: "
                                        "a docker host's workloads run through its daemon" % (
                                            there.get("version"), sock, d["pid"], no_kubelet, cli_said))
    known = [s for d in local for s in dockerd_sockets(d)]
    where = ", nor at %s" % ", ".join(known) if known else ", and the socket it listens on is not known"
    reason = "a docker daemon runs here (%s) but %s%s" % (pids, cli_said, where)
    return _describe(dict(docker, usable=False, reason=reason), "docker, %s; %s" % (no_kubelet, reason))


def select_runtimes(requested="auto", timeout=30, endpoint=None, root="/", descriptor=None, inspect=False, procs=None):
    """The engines a run verifies through: a list of detection dicts (name, version, path or endpoint, usable,
    reason, ...) each with ``selected_because``. ``auto`` gives exactly one (name None when no
    runtime is found); a list gives one per name, in order. ValueError for a bad option. ``inspect``: the inspect
    stage's detection (``cli_info``): podman's version only, podman info left to the probe stage. ``root``: the node's
    files and /proc are read under it (a fixture tree; its sockets are dialled there); ``procs``: the processes to
    consider (default: all)."""
    names = parse_runtime_option(requested)
    endpoint = check_endpoint(endpoint)
    kubelet = kubelet_endpoint(root, procs) if (names == ["auto"] or set(names) & set(CRI_ENGINES)) and not endpoint else None
    if names != ["auto"]:
        # the endpoint is a CRI engine's socket, or docker's when docker alone is named
        return [_describe(detect_one(n, timeout, endpoint if n in CRI_ENGINES or names == ["docker"] else None, kubelet,
                                     descriptor, inspect, root), "named in the runtime option%s" % (
            " (endpoint %s)" % endpoint if endpoint and (n in CRI_ENGINES or names == ["docker"]) else "")) for n in names]
    if endpoint:
        info = _cri_info(_guess_cri(endpoint), endpoint, timeout, descriptor)
        answered = info.get("runtime_name") or (info.get("name") if info.get("usable") else None)
        return [_describe(info, "runtime_endpoint %s was given; the CRI Version call there answered %s" % (
            endpoint, "%s %s" % (answered, info.get("version")) if answered else "nothing (%s)" % info.get("reason")))]
    if kubelet["installed"] and kubelet.get("unknown"):
        selection = why.unknown_selection(kubelet)
        info = {"name": None, "usable": False, "path": None, "endpoint": None, "version": None, "selection": selection,
                "reason": "the kubelet's CRI endpoint could not be known (%s): no runtime is verified in its place" % kubelet["unknown"]}
        return [_describe(info, selection["sentence"])]
    if kubelet["installed"]:
        serving = (kubelet.get("serving") or {}).get("engine")
        info = _cri_info(serving or _guess_cri(kubelet["endpoint"]), _dial(kubelet["endpoint"], root), timeout, descriptor)
        selection = why.kubelet_selection(kubelet, info, kubelet["endpoint"])
        # what the kubelet sends in a Pod's RunPodSandbox and where it pulls: the CRI probe does the same (_runtime.cri)
        info.update(selection=selection, kubelet_pod=kubelet.get("pod"))
        return [_describe(info, selection["sentence"])]
    tried = [why.NO_KUBELET]
    docker = cli_info("docker", timeout=timeout, root=root) if which("docker") else None
    local = [d for d in kubelet["daemons"] if d["engine"] == "dockerd"]
    if docker is not None and docker.get("daemon_running"):
        return [_describe(docker, "docker %s at %s, %s; a docker daemon is running (docker info answered there): a docker "
                                  "host's workloads run through docker" % (docker.get("version"), _docker_because(docker), tried[0]))]
    if docker is not None and docker.get("refused") and local:
        return [_describe(docker, "docker, %s; a docker daemon runs here (%s) but %s" % (
            tried[0], ", ".join("pid %d" % d["pid"] for d in local), docker["refused"]))]
    if docker is not None and local:
        return [_running_dockerd(docker, local, tried[0], timeout, root)]
    tried.append("docker not asked: %s" % docker["refused"] if docker and docker.get("refused") else
                 "no running docker daemon (%s)" % (docker["reason"] if docker else "no docker CLI"))
    podman = cli_info("podman", timeout=timeout, inspect=inspect)
    if podman.get("path"):
        return [_describe(podman, "%s; podman %s is installed" % ("; ".join(tried), podman.get("version") or ""))]
    tried.append(podman.get("reason") or "podman not found")
    return [_describe({"name": None, "usable": False, "path": None, "version": None,
                       "reason": "no usable container runtime: %s" % "; ".join(tried)}, "; ".join(tried))]
