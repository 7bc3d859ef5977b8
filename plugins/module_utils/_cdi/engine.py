# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (cdi layer): the container engine's own CDI configuration, as the engine reports it. Not public API.

Whether the engine that will run the workloads injects CDI devices at all, and which spec dirs it reads, is
cdi-layer evidence: a spec in a dir the engine does not read, or an engine with CDI off, fails the request before
any container starts. Each engine is asked the way its operators ask it:

- containerd: ``containerd --config <the running daemon's config> config dump`` (TOML). The CRI plugin's section
  is ``plugins."io.containerd.grpc.v1.cri"`` in config version 2 (containerd 1.x; a version 1 file is migrated by
  the dump), ``plugins."io.containerd.cri.v1.runtime"`` in version 3 (containerd 2.x); keys ``enable_cdi`` (default
  false in 1.7, true from 2.0) and ``cdi_spec_dirs``. The daemon's config file is the ``--config`` of the containerd
  process serving the endpoint (/proc), else /etc/containerd/config.toml; where that file does not exist containerd
  runs with its defaults, which ``containerd config default`` prints.
- CRI-O: ``crio status --socket <socket> config`` (TOML of the running server's configuration):
  ``crio.runtime.cdi_spec_dirs``; CRI-O has no switch for CDI.
- docker: ``docker info --format '{{json .}}'``: ``CDISpecDirs`` (docker 25+, API 1.44); dockerd empties it when its
  ``cdi`` feature is off (moby cmd/dockerd/daemon.go), so an empty list is CDI off.
- podman: containers.conf (``/usr/share/containers``, ``/etc/containers``, its ``.d`` drop-ins, ``CONTAINERS_CONF``):
  ``engine.cdi_spec_dirs``, which podman hands to its CDI library from 5.5.0 only (``_compat.CONFIG_DIRS_SINCE``);
  before it the library's default dirs are read whatever the file says.

A configuration that cannot be read or is not understood is never taken as on: the check is NOT_RUN with why.
"""

from __future__ import annotations

import functools
import glob
import json
import os
import posixpath

from ansible_collections.gpuprobe.layers.plugins.module_utils._common import toml as _toml
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import compat as _compat, engine_live as _live
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import engine_template as _template
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS, LayerBuilder
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.run import first_line, run, which
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.nodefs import flag_value, same_socket
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.select import engine_label
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.fs import under_root
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.vocab import SPEC_DIRS

CHECKS = {
    "cdi.engine.config": {
        "title": "the engine that will run the workloads (per runtime verified) has CDI enabled in its own configuration "
                 "(containerd config dump enable_cdi, docker info CDISpecDirs) and reads a spec dir that holds a spec "
                 "providing each requested device (containerd / CRI-O cdi_spec_dirs, docker CDISpecDirs, podman >= 5.5 "
                 "containers.conf cdi_spec_dirs, else the CDI library's /etc/cdi and /var/run/cdi)",
        "fail": "CDI is disabled in that engine, or no spec providing the device is in a dir it reads: its containers "
                "get no device ('unresolvable CDI devices' or no injection at all) though the spec itself is fine. "
                "NOT_RUN: the engine's configuration could not be read or was not understood (never taken as on)",
        "next": "containerd: enable_cdi = true (and cdi_spec_dirs) in the CRI plugin section, restart; docker: "
                "features.cdi in daemon.json (cdi-spec-dirs); CRI-O / podman: cdi_spec_dirs; or write the spec into "
                "a dir the engine reads",
    },
}

CHECKS.update(_live.CHECKS)
CHECKS.update(_template.CHECKS)

CONTAINERD_SECTIONS = {1: ("cri",), 2: ("io.containerd.grpc.v1.cri",), 3: ("io.containerd.cri.v1.runtime",)}
CONTAINERD_DEFAULT_CONFIG = "/etc/containerd/config.toml"
CONTAINERD_DEFAULT_ADDRESS = "/run/containerd/containerd.sock"
GRPC_SERVER_PLUGIN = "io.containerd.server.v1.grpc"   # configuration version 4: the gRPC address is this plugin's
PODMAN_CONFIGS = ("/usr/share/containers/containers.conf", "/etc/containers/containers.conf",
                  "/etc/containers/containers.conf.d/*.conf")
CONFIG_TIMEOUT = 30


def _not_understood(exc):
    """Why a TOML text was not read: no reader on this node, or the reader's own words."""
    return str(exc) if _toml.READER is None else "output not understood by %s: %s" % (_toml.READER, exc)


def _result(engine, source, enabled=None, spec_dirs=None, origin=None, reason=None, reader=None, **extra):
    """The engine configuration record: enabled True/False/None (unknown), spec_dirs the dirs it reads (None:
    unknown), origin 'configured'/'default'/..., reason why unknown or off."""
    out = {"engine": engine, "source": source, "enabled": enabled, "spec_dirs": spec_dirs, "origin": origin,
           "reason": reason, "reader": reader}
    out.update(extra)
    return out


def _str_list(value):
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def containerd_cdi(doc, version=None, source="containerd config dump", reader=None):
    """The CRI plugin's CDI settings from a parsed containerd config (a ``config dump``)."""
    try:
        config_version = int(doc.get("version", 1))
    except (TypeError, ValueError):
        return _result("containerd", source, reason="config version %r not understood" % doc.get("version"), reader=reader)
    names = CONTAINERD_SECTIONS.get(config_version)
    if names is None:
        return _result("containerd", source, reason="config version %d is not one this collection knows (1-3)" % config_version,
                       reader=reader)
    plugin = names[0]
    full = plugin if config_version > 1 else "io.containerd.grpc.v1.cri"
    disabled = [p for p in doc.get("disabled_plugins") or [] if p in (plugin, full, "cri", "io.containerd.grpc.v1.cri")]
    where = 'plugins."%s"' % plugin
    extra = {"config_version": config_version, "section": where}
    if disabled:
        return _result("containerd", source, enabled=False, reader=reader,
                       reason="the CRI plugin is disabled (disabled_plugins %s): the kubelet cannot use this containerd" % disabled,
                       **extra)
    section = (doc.get("plugins") or {}).get(plugin)
    if not isinstance(section, dict):
        return _result("containerd", source, reader=reader, reason="no %s section in the configuration" % where, **extra)
    enabled = section.get("enable_cdi")
    if enabled is None:
        # config dump prints every key; a hand-made config may leave it out: the release's default decides
        v = _compat.parse_version(version)
        if v is None:
            return _result("containerd", source, reader=reader, reason="%s has no enable_cdi and the containerd version "
                           "(%s) is unknown: its default (off in 1.7, on from 2.0) cannot be told" % (where, version), **extra)
        enabled = v >= (2, 0, 0)
        extra["enable_cdi_default"] = True
    if not isinstance(enabled, bool):
        return _result("containerd", source, reader=reader, reason="%s.enable_cdi is %r, not a boolean" % (where, enabled), **extra)
    dirs = section.get("cdi_spec_dirs")
    if dirs is None:
        dirs, origin = list(SPEC_DIRS), "default"
    elif _str_list(dirs):
        origin = "configured"
    else:
        return _result("containerd", source, enabled=enabled, reader=reader,
                       reason="%s.cdi_spec_dirs is %r, not a list of paths" % (where, dirs), **extra)
    return _result("containerd", source, enabled=enabled, spec_dirs=list(dirs), origin=origin, reader=reader,
                   reason=None if enabled else "%s.enable_cdi = false%s" % (
                       where, " (containerd %s's default)" % version if extra.get("enable_cdi_default") else ""), **extra)


def crio_cdi(doc, source="crio status config", reader=None):
    """CRI-O's CDI spec dirs from its configuration (``crio status config``): CRI-O always injects CDI devices."""
    runtime = ((doc.get("crio") or {}).get("runtime"))
    if not isinstance(runtime, dict):
        return _result("crio", source, reader=reader, reason="no [crio.runtime] table in the configuration")
    dirs = runtime.get("cdi_spec_dirs")
    if dirs is None:
        return _result("crio", source, enabled=True, spec_dirs=list(SPEC_DIRS), origin="default", reader=reader)
    if not _str_list(dirs):
        return _result("crio", source, enabled=True, reader=reader, reason="crio.runtime.cdi_spec_dirs is %r, not a list" % (dirs,))
    return _result("crio", source, enabled=True, spec_dirs=list(dirs), origin="configured", reader=reader)


def docker_cdi(info, source="docker info"):
    """docker's CDI state from ``docker info --format '{{json .}}'`` (a dict)."""
    version = info.get("ServerVersion")
    if "CDISpecDirs" not in info:
        v = _compat.parse_version(version)
        if v is not None and v < (25, 0, 0):
            return _result("docker", source, enabled=False, reason="docker %s reports no CDISpecDirs: no CDI before docker 25" % version)
        return _result("docker", source, reason="docker %s reports no CDISpecDirs field" % version)
    dirs = info.get("CDISpecDirs")
    if dirs is None or dirs == []:
        return _result("docker", source, enabled=False, spec_dirs=[],
                       reason="CDISpecDirs is empty: the daemon's cdi feature is off (daemon.json features.cdi; on by "
                              "default from docker 28.2) or cdi-spec-dirs is empty")
    if not _str_list(dirs):
        return _result("docker", source, reason="CDISpecDirs is %r, not a list of paths" % (dirs,))
    return _result("docker", source, enabled=True, spec_dirs=list(dirs), origin="daemon")


def podman_cdi(docs, version, source):
    """podman's CDI spec dirs from its containers.conf files (parsed, in load order: later ones override)."""
    configured = None
    for doc in docs:
        dirs = (doc.get("engine") or {}).get("cdi_spec_dirs")
        if dirs is not None:
            if not _str_list(dirs):
                return _result("podman", source, enabled=True, reason="engine.cdi_spec_dirs is %r, not a list" % (dirs,))
            configured = list(dirs)
    row = _compat.readable_versions("podman", version)
    dirs, origin, maybe = _compat.spec_dirs_read("podman", row, configured)
    if maybe is not None:
        return _result("podman", source, enabled=True, configured_spec_dirs=configured,
                       reason="containers.conf sets cdi_spec_dirs %s, honoured from podman %s only, and this podman's "
                              "version (%s) is unknown" % (", ".join(configured), _compat.CONFIG_DIRS_SINCE["podman"][0], version))
    return _result("podman", source, enabled=True, spec_dirs=dirs, origin=origin, configured_spec_dirs=configured)


# ------------------------------------------------------------------------------------------------------------
# reading the running engine's configuration on the node


def _proc_cmdlines(name):
    """[(pid, argv, exe)] of the processes whose argv[0] is ``name`` (its basename)."""
    out = []
    for pid in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % pid, "rb") as fh:
                argv = [a.decode("utf-8", "replace") for a in fh.read().split(b"\0") if a]
        except OSError:
            continue
        if argv and os.path.basename(argv[0]) == name:
            try:
                exe = os.readlink("/proc/%s/exe" % pid)
            except OSError:
                exe = None
            out.append((int(pid), argv, exe))
    return out


def socket_path(endpoint):
    text = str(endpoint or "")
    return text[len("unix://"):] if text.startswith("unix://") else text


def _containerd_dump(binary, config, timeout):
    """(doc, source, error): ``containerd --config <config> config dump`` parsed; a missing default config file is
    what containerd runs without: its defaults (``containerd config default``)."""
    r = run([binary, "--config", config, "config", "dump"], timeout=timeout)
    source = "%s --config %s config dump" % (binary, config)
    if r["rc"] != 0:
        err = first_line(r["stderr"]) or r["error"] or "rc %s" % r["rc"]
        if config == CONTAINERD_DEFAULT_CONFIG and "no such file" in err.lower():
            r = run([binary, "config", "default"], timeout=timeout)
            source = "%s config default (no %s: containerd runs with its defaults)" % (binary, config)
            if r["rc"] != 0:
                return None, source, first_line(r["stderr"]) or r["error"] or "rc %s" % r["rc"]
        else:
            return None, source, err
    try:
        return _toml.loads(r["stdout"]), source, None
    except _toml.TomlError as exc:
        return None, source, _not_understood(exc)


def read_containerd(info, timeout=CONFIG_TIMEOUT):
    """The CDI configuration of the containerd serving ``info['endpoint']``: the containerd process whose address is
    that socket (the same socket by (st_dev, st_ino), else by real path: kubeadm's /var/run/... is containerd's
    /run/... where /var/run links to /run)."""
    sock = posixpath.normpath(socket_path(info.get("endpoint")) or CONTAINERD_DEFAULT_ADDRESS)
    procs = _proc_cmdlines("containerd")
    tried = []
    for _pid, argv, exe in procs:
        # the binary that runs (its /proc exe), so the dump is that release's; else the one on PATH
        binary = exe if exe and os.path.basename(exe).startswith("containerd") and os.path.exists(exe) else which("containerd")
        if not binary:
            continue
        config = flag_value(argv[1:], "--config", "-c") or CONTAINERD_DEFAULT_CONFIG
        doc, source, err = _containerd_dump(binary, config, timeout)
        if err:
            tried.append("%s: %s" % (source, err))
            continue
        address = flag_value(argv[1:], "--address", "-a") or ((doc.get("plugins") or {}).get(GRPC_SERVER_PLUGIN) or {}).get(
            "address") or (doc.get("grpc") or {}).get("address") or CONTAINERD_DEFAULT_ADDRESS
        if same_socket(address, sock)[0]:
            out = containerd_cdi(doc, info.get("version"), source, _toml.reader_name())
            out["_doc"] = doc   # the whole dump, for the file's handlers and NRI (read_containerd_live takes it out)
            out["_config"] = config   # the file itself, for the template it is regenerated from (k3s, MicroK8s)
            return out
        tried.append("%s serves %s" % (source, address))
    if not procs:
        tried.append("no containerd process found in /proc")
    return _result("containerd", "containerd config dump", reader=_toml.reader_name(),
                   reason="the configuration of the containerd serving %s was not found (%s)" % (sock, "; ".join(tried)))


def read_containerd_live(info, timeout=CONFIG_TIMEOUT):
    """The running containerd's configuration (its CRI config from the detection's CRI Status call, ``cri_config``),
    with its file's (``read_containerd``) beside it as ``file`` and where they disagree (``disagreements``). Without a
    live config (the Status call gave none) the file's, saying so."""
    file_rec = read_containerd(info, timeout)
    doc, config = file_rec.pop("_doc", None), file_rec.pop("_config", None)
    if not info.get("cri_config"):
        file_rec["live"] = False   # the running daemon gave no CRI config (CRI Status verbose): its file is all there is
        file_rec["template"] = _template_of(config, None)
        return file_rec
    live = _live.containerd_live(info["cri_config"], "CRI Status (verbose) at %s" % info.get("endpoint"))
    side = dict((k, file_rec.get(k)) for k in ("source", "enabled", "spec_dirs", "reason", "config_version"))
    if doc is not None:
        side.update(_live.containerd_file(doc))
    live.update(file=side, disagreements=_live.disagreements(side, live), nri=_live.nri_live(side.get("nri")),
                reader=file_rec.get("reader"))
    live["template"] = _template_of(config, live)
    return live


def _template_of(config, live):
    """``_cdi.engine_template.compare`` of the file ``config`` (its own text, not the dump: what it sets) with the
    running daemon ``live``; None where no template is beside it."""
    if not config or not _template.find(config)[0]:
        return None
    try:
        with open(config) as fh:
            generated = _toml.loads(fh.read(1024 * 1024))
    except (OSError, UnicodeDecodeError, _toml.TomlError):
        generated = {}
    return _template.compare(config, live, generated)


def read_crio(info, timeout=CONFIG_TIMEOUT):
    binary = which("crio")
    sock = socket_path(info.get("endpoint"))
    if not binary:
        return _result("crio", "crio status config", reason="no crio binary on PATH to ask for the configuration")
    argv = [binary, "status", "--socket", sock, "config"] if sock else [binary, "status", "config"]
    r = run(argv, timeout=timeout)
    source = " ".join(argv)
    if r["rc"] != 0:
        return _result("crio", source, reason="%s failed: %s" % (source, first_line(r["stderr"]) or r["error"] or r["rc"]))
    try:
        doc = _toml.loads(r["stdout"])
        out = crio_cdi(doc, source, _toml.reader_name())
        out.update(_live.crio_handlers(doc), live=True)   # the running server's own configuration
        return out
    except _toml.TomlError as exc:
        return _result("crio", source, reason=_not_understood(exc))


def read_docker(info, timeout=CONFIG_TIMEOUT):
    """docker's CDI configuration from ``docker info`` at the endpoint the detection used. A context the detection
    refused (ssh://, tcp://) is never contacted, and neither is a daemon the detection found not answering (its reason
    is kept); an answer without a server (docker 26 prints its client's info and exits 0: ``ServerErrors``, no
    ``ServerVersion``) is no daemon, never a live configuration."""
    path = info.get("path") or which("docker")
    if not path:
        return _result("docker", "docker info", reason="no docker CLI")
    # the daemon the engine was detected at (its socket as DOCKER_HOST), not whichever the CLI would default to
    env = dict(os.environ, **info["env"]) if info.get("env") else None
    source = "%s%s info --format '{{json .}}'" % ("DOCKER_HOST=%s " % info["env"]["DOCKER_HOST"] if (info.get("env") or {}).get(
        "DOCKER_HOST") else "", path)
    if info.get("refused"):
        return _result("docker", source, reason="not asked: %s" % info["refused"], live=False)
    if info.get("daemon_running") is False:
        return _result("docker", source, reason="not asked again: %s" % info.get("reason"), live=False)
    if isinstance(info.get("daemon_info"), dict) and info.get("path") == path:
        # the detection's own docker info call (same CLI, same daemon, this run): its answer, not a second call
        return _docker_live(docker_cdi(info["daemon_info"], source), info["daemon_info"], info)
    r = run([path, "info", "--format", "{{json .}}"], timeout=timeout, env=env)
    if r["rc"] != 0:
        return _result("docker", source, reason="docker info failed: %s" % (first_line(r["stderr"]) or r["error"]), live=False)
    try:
        doc = json.loads(r["stdout"])
    except ValueError as exc:
        return _result("docker", source, reason="docker info output is not JSON: %s" % exc, live=False)
    doc = doc if isinstance(doc, dict) else {}
    if doc.get("ServerErrors") or not doc.get("ServerVersion"):
        errors = [str(e) for e in doc.get("ServerErrors") or []]
        return _result("docker", source, live=False, reason="no docker daemon answered: %s" % (
            (errors[:1] or [first_line(r["stderr"])])[0] or "no server version in docker info's answer"))
    return _docker_live(docker_cdi(doc, source), doc, info)


def _docker_live(out, daemon_info, info):
    """docker info's answer (live) with the runtimes it names, and the dockerd's daemon.json beside it."""
    out.update(_live.docker_handlers(daemon_info), live=True)
    side = _live.read_docker_file(info.get("endpoint"), _proc_cmdlines("dockerd"))
    out.update(file=side, disagreements=_live.disagreements(side, out))
    return out


def podman_config_files(root="/", environ=None):
    environ = os.environ if environ is None else environ
    if environ.get("CONTAINERS_CONF"):  # containers.conf(5): used instead of the system files
        files = [environ["CONTAINERS_CONF"]]
    else:
        files = []
        for pattern in PODMAN_CONFIGS:
            files.extend(sorted(glob.glob(under_root(root, pattern))))
    if environ.get("CONTAINERS_CONF_OVERRIDE"):
        files.append(environ["CONTAINERS_CONF_OVERRIDE"])
    return [f for f in files if os.path.isfile(f)]


def podman_config_docs(root="/", environ=None):
    """(source, [parsed containers.conf documents in load order], error or None): podman's configuration as it
    reads it (podman_config_files); ``error`` names the file that could not be read."""
    files = podman_config_files(root, environ)
    source = "containers.conf: %s" % (", ".join(files) or "none (podman's built-in defaults)")
    docs = []
    for path in files:
        try:
            with open(path, "r") as fh:
                docs.append(_toml.loads(fh.read(1024 * 1024)))
        except (OSError, UnicodeDecodeError, _toml.TomlError) as exc:
            return source, docs, "%s not read: %s" % (path, exc)
    return source, docs, None


def read_podman(info, root="/", environ=None):
    source, docs, error = podman_config_docs(root, environ)
    if error:
        return _result("podman", source, reader=_toml.reader_name(), reason=error)
    out = podman_cdi(docs, info.get("version"), source)
    out["reader"] = _toml.reader_name()
    return out


def read_engine_config(info, timeout=CONFIG_TIMEOUT, root="/", environ=None):
    """The CDI configuration of the engine ``info`` (a selected runtime's detection dict), as that engine reports it.
    Never raises for an engine that cannot be asked: the record says why (enabled None)."""
    name = (info or {}).get("name")
    try:
        if name == "containerd":
            return read_containerd_live(info, timeout)
        if name == "crio":
            return read_crio(info, timeout)
        if name == "docker":
            return read_docker(info, timeout)
        if name == "podman":
            return read_podman(info, root, environ)
    except Exception as exc:  # pylint: disable=broad-except
        return _result(name, "reading the configuration", reason="%s: %s" % (type(exc).__name__, exc))
    return _result(name, None, reason="no engine selected: %s" % ((info or {}).get("reason") or "unknown"))


# ------------------------------------------------------------------------------------------------------------
# the check


def describe(info):
    """``info`` (a selected engine's dict) with ``cdi_library``: the CDI library the compat table gives its release
    (library, the highest cdiVersion it reads, status, why, the build the row is for, the reading of readings.py) and
    ``label`` (engine, version, socket or path)."""
    info = dict(info or {})
    info["label"] = engine_label(info)
    if info.get("name"):
        row = _compat.readable_versions(info["name"], info.get("version"))
        info["cdi_library"] = {"library": row["library"], "max_readable": row["max_readable"], "status": row["status"],
                               "why": row["why"], "build": row["build"], "reading": row["reading"]}
    return info


def engine_checks(engines, files, sources, requested, root="/"):
    """The ``cdi.engine.config`` checks: for each selected engine (its detection dict with ``cdi_config`` from
    ``read_engine_config``) and each requested device, whether that engine injects CDI devices and reads a dir
    holding a spec that provides the device. ``files``: the cdi layer's file records; ``sources``: requested
    qualified name -> the spec the cdi layer resolved it to; ``requested``: the resolved requested devices."""
    builder = LayerBuilder("cdi", CHECKS)
    add = functools.partial(builder.add, "cdi.engine.config")

    for info in engines or []:
        label = engine_label(info)
        cfg = info.get("cdi_config") or {}
        where = cfg.get("source") or "its configuration"
        if not info.get("name"):
            add(NOT_RUN, "runtime", "the engine's CDI configuration", info.get("reason") or "no runtime selected")
            continue
        if cfg.get("enabled") is None or (cfg.get("enabled") and cfg.get("spec_dirs") is None):
            add(NOT_RUN, label, "CDI enabled, with its spec dirs", "unknown: %s (%s)" % (cfg.get("reason") or "not read", where))
            continue
        injector = (info.get("runtime_handler") or {}).get("injector")
        if not cfg["enabled"] and not injector:
            add(FAIL, label, "CDI enabled", "CDI is off: %s (%s)%s" % (cfg.get("reason") or "disabled", where, "".join(
                "; %s" % n for n in (info.get("runtime_handler") or {}).get("notes") or [])))
            continue
        if not cfg["enabled"]:
            # the engine's CDI is off, and the handler's OCI runtime injects (NVIDIA's runtime in cdi mode): its spec dirs
            cfg = dict(cfg, spec_dirs=injector.get("spec_dirs") or list(SPEC_DIRS), origin="its runtime's",
                       source="%s's CDI is off (%s); %s, %s" % (info["name"], where, injector["what"], injector.get("source")))
            where = cfg["source"]
        dirs = [posixpath.normpath(d) for d in cfg["spec_dirs"]]
        dirs_text = "%s (%s, %s)" % (", ".join(dirs) or "none", cfg.get("origin"), where)
        if not requested:
            add(PASS, label, "CDI enabled", "CDI on; reads %s" % dirs_text)
            continue
        host_dirs = [posixpath.normpath(under_root(root, d)) for d in dirs]
        for q in requested:
            kind, _sep, dev = q.partition("=")
            providers = [r for r in files or [] if r.get("ok") and r.get("kind") == kind and dev in (r.get("devices") or [])]
            paths = sorted(set([r.get("path") for r in providers] + ([sources[q]] if sources.get(q) else [])))
            seen = [p for p in paths if posixpath.normpath(posixpath.dirname(p)) in host_dirs]
            subject = "%s: %s" % (label, q)
            if seen:
                add(PASS, subject, "a spec providing it in a dir the engine reads", "%s; CDI on, reads %s" % (", ".join(seen), dirs_text))
            else:
                add(FAIL, subject, "a spec providing it in a dir the engine reads",
                    "%s is in %s, which %s does not read: it reads %s" % (
                        ", ".join(paths) or "no spec", ", ".join(sorted(set(posixpath.dirname(p) for p in paths))) or "no dir",
                        info["name"], dirs_text))
    checks = builder.checks
    for info in engines or []:
        checks += [dict(c) for c in _live.handler_checks(info) + _live.file_checks(info) + _template.checks(info)]
    return checks
