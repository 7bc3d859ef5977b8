# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the CRI endpoint a kubelet uses, from the running kubelet first. Not public API.

The kubelet is found, in this order:

1. running: a process whose argv[0] is ``kubelet`` (kubeadm, Kubespray, RKE2's child, OpenShift's ``kubelet`` or
   ``hyperkube kubelet``), or MicroK8s' ``kubelite`` with the arguments of its ``--kubelet-args-file`` (read as
   kubelite reads it: one or more arguments a line, ``#`` comments, quotes removed, ``$VAR`` expanded from kubelite's
   environment: ``SNAP_DATA``, ``SNAP_COMMON``). Its argv is what the kubelet was started with;
2. not running: the ``kubelet.service`` unit's ``ExecStart=`` with its drop-ins and environment files
   (``_runtime.systemd``; kubeadm's ``10-kubeadm.conf`` with ``kubeadm-flags.env``, Kubespray's ``kubelet.env``);
   kubeadm's files alone (``/var/lib/kubelet/kubeadm-flags.env``, ``/var/lib/kubelet/config.yaml``) where there is
   no unit.

The endpoint is the kubelet's own precedence: the ``--container-runtime-endpoint`` flag, over the
``containerRuntimeEndpoint`` of the ``--config-dir`` drop-ins (``*.conf``, in lexical order, the last that sets it),
over that of the ``--config`` file, over the KubeletConfiguration default ``unix:///run/containerd/containerd.sock``
(kubernetes pkg/kubelet/apis/config/v1beta1/defaults.go). A bare path is a unix socket (the kubelet accepts it).

A file of that chain that cannot be read here (a ``--config`` kept 0600 for root while the collection runs
unprivileged, a drop-in that is not YAML) makes the endpoint unknown (``endpoint`` None, ``unknown`` the reason): the
kubelet reads its files as root and fails rather than fall back, so the default is never assumed in its place.
"""

from __future__ import annotations

import os
import re

from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import nodefs, systemd
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.nodefs import flag_value

DEFAULT_ENDPOINT = "unix:///run/containerd/containerd.sock"
KUBELET_UNIT = "kubelet.service"
KUBEADM_CONFIG = "/var/lib/kubelet/config.yaml"
KUBEADM_FLAGS = "/var/lib/kubelet/kubeadm-flags.env"
# files kubeadm's drop-in reads (EnvironmentFile=), where the unit itself is not there to read
KUBEADM_ENV_FILES = (KUBEADM_FLAGS, "/etc/default/kubelet", "/etc/sysconfig/kubelet")
MICROK8S_SNAP_ENV = {"SNAP_DATA": "/var/snap/microk8s/current", "SNAP_COMMON": "/var/snap/microk8s/common"}


def normalize_endpoint(value):
    """A kubelet endpoint value as unix://path (the kubelet takes a bare path as a unix socket, with a warning)."""
    value = str(value or "").strip()
    return "unix://" + value if value.startswith("/") else value


def config_value(text, key):
    """``key`` of a KubeletConfiguration (YAML or JSON): its value (a string, a bool as YAML reads it), '' when not set,
    None when the text is not understood."""
    try:
        import yaml  # pylint: disable=import-outside-toplevel
    except ImportError:  # pragma: no cover - PyYAML comes with ansible-core
        yaml = None
    if yaml is not None:
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError:
            return None
        if doc is None:
            return ""
        if not isinstance(doc, dict):
            return None
        value = doc.get(key)
        return "" if value is None else value if isinstance(value, bool) else str(value)
    m = re.search(r"^%s\s*:\s*['\"]?([^'\"#\s]+)" % re.escape(key), text, re.M)
    return m.group(1) if m else ""


def config_endpoint(text):
    """containerRuntimeEndpoint of a KubeletConfiguration (``config_value``)."""
    return config_value(text, "containerRuntimeEndpoint")


def kubelite_args(root, path, environ):
    """The kubelet arguments of MicroK8s' kubelite ``--kubelet-args-file`` (kubelite's ReadArgsFromFile: trimmed
    lines, ``#`` comments and empty lines skipped, quotes removed, split at blanks, ``os.ExpandEnv`` of each part),
    or None when the file cannot be read."""
    text = nodefs.read_text(root, path)
    if text is None:
        return None
    env = dict(MICROK8S_SNAP_ENV, **(environ or {}))
    args = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        line = line.replace('"', "").replace("'", "")
        for part in line.split(" "):
            args.append(re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)",
                               lambda m: env.get(m.group(1) or m.group(2), ""), part))
    return args


def running(root="/", procs=None):
    """The running kubelet: dict pid, program ('kubelet', 'hyperkube kubelet', 'kubelite'), args (the kubelet's
    arguments), argv, unit (its systemd unit, from its cgroup), args_file (kubelite), errors; None when none runs."""
    procs = nodefs.processes(root) if procs is None else procs
    for p in procs:
        argv, name = p["argv"], p["name"]
        if name == "kubelet":
            program, args = "kubelet", argv[1:]
        elif name == "hyperkube" and argv[1:2] == ["kubelet"]:
            program, args = "hyperkube kubelet", argv[2:]
        elif name == "kubelite":
            args_file = flag_value(argv[1:], "--kubelet-args-file")
            environ = nodefs.proc_environ(root, p["pid"])
            args = kubelite_args(root, args_file, environ) if args_file else None
            out = {"pid": p["pid"], "program": "kubelite", "argv": argv, "args": args or [], "args_file": args_file,
                   "unit": nodefs.proc_unit(root, p["pid"]), "errors": []}
            if args is None:
                out["errors"].append("kubelite (pid %d) --kubelet-args-file %s not readable" % (p["pid"], args_file))
            return out
        else:
            continue
        return {"pid": p["pid"], "program": program, "argv": argv, "args": args, "args_file": None,
                "unit": nodefs.proc_unit(root, p["pid"]), "errors": []}
    return None


def read_config(root, path):
    """(text, why): a kubelet configuration file's text, or None and why it could not be read here ('not readable
    by uid 65534: Permission denied')."""
    try:
        with open(nodefs.resolve(root, path)[1], "r") as fh:
            return fh.read(nodefs.READ_LIMIT), None
    except OSError as exc:
        return None, "not readable by uid %d: %s" % (os.geteuid(), exc.strerror or exc)
    except UnicodeDecodeError:
        return None, "not text"


def file_endpoint(root, path, what, key="containerRuntimeEndpoint"):
    """(value, error) of the kubelet configuration file ``path``: value '' when it sets no ``key``
    (containerRuntimeEndpoint); None and the error ('kubelet config /x not readable by uid 65534: Permission denied')
    when it cannot be read."""
    text, why = read_config(root, path)
    value = config_value(text, key) if text is not None else None
    if value is None:
        return None, "%s %s %s" % (what, path, why or "not understood (YAML)")
    return value, None


def dropins_endpoint(root, config_dir, key="containerRuntimeEndpoint"):
    """(value, path, errors): the ``key`` (containerRuntimeEndpoint) of the ``*.conf`` files of a kubelet --config-dir,
    merged in the lexical order the kubelet merges them (the last that sets it), or (None, None, errors)."""
    found, errors = (None, None), []
    for name in nodefs.list_dir(root, config_dir):
        path = "%s/%s" % (config_dir.rstrip("/"), name)
        if not name.endswith(".conf") or not nodefs.is_file(root, path):
            continue
        value, error = file_endpoint(root, path, "kubelet drop-in", key)
        if error:
            errors.append(error)
        elif value != "":
            found = (value, path)
    return found[0], found[1], errors


def unknown_because(errors, whose, fallback="the default unix:///run/containerd/containerd.sock, so no endpoint is assumed"):
    """The sentence of an endpoint (or of what ``fallback`` names) that could not be known from ``errors`` (the files
    that could not be read)."""
    return "unknown: %s; %s reads its configuration as root and does not fall back to %s" % ("; ".join(errors), whose, fallback)


def endpoint_of_args(root, args, whose, where, default_config=None):
    """The CRI endpoint of a kubelet started with ``args``: dict endpoint, source (a sentence naming the flag or the
    file), config, config_dir, errors, unknown (why the endpoint could not be known, endpoint None). ``whose``: whose
    arguments they are ('the running kubelet'), ``where``: where they were read ('/proc/901/cmdline');
    ``default_config``: the config file to read when there is no --config (kubeadm's, where only its files are there
    to read); pod: what it sends in RunPodSandbox and where it pulls (``pod_settings``)."""
    out = {"endpoint": None, "source": None, "config": None, "config_dir": None, "errors": [], "unknown": None}
    flag = flag_value(args, "--container-runtime-endpoint")
    config = flag_value(args, "--config") or default_config
    config_dir = flag_value(args, "--config-dir")
    out.update(config=config, config_dir=config_dir)
    out["pod"] = pod_settings(root, args, whose, where, config, config_dir)
    if flag:
        out.update(endpoint=normalize_endpoint(flag), source="--container-runtime-endpoint=%s on %s's command line (%s)" % (
            flag, whose, where))
        return out
    if config_dir:
        value, path, errors = dropins_endpoint(root, config_dir)
        out["errors"] += errors
        if errors:   # a drop-in not read may set it, later in the order than the one read
            out.update(unknown=unknown_because(errors, whose), source=unknown_because(errors, whose))
            return out
        if value:
            out.update(endpoint=normalize_endpoint(value), source="containerRuntimeEndpoint in %s (%s's --config-dir)" % (
                path, whose))
            return out
    if config:
        value, error = file_endpoint(root, config, "kubelet config")
        if error:
            out["errors"].append(error)
            out.update(unknown=unknown_because([error], whose), source=unknown_because([error], whose))
            return out
        if value:
            out.update(endpoint=normalize_endpoint(value), source="containerRuntimeEndpoint in %s%s" % (
                config, " (%s's --config)" % whose if config != default_config else ""))
            return out
    missing = ", no containerRuntimeEndpoint in %s" % config if config else ", no config file"
    out.update(endpoint=DEFAULT_ENDPOINT, source="the KubeletConfiguration default: no --container-runtime-endpoint on "
               "%s's command line (%s)%s" % (whose, where, missing))
    return out


# what the kubelet sends in RunPodSandbox and where it pulls, beside its endpoint: (name, flag, KubeletConfiguration key,
# default of kubernetes pkg/kubelet/apis/config/v1beta1/defaults.go). cgroupRoot '' becomes '/' where cgroupsPerQOS is
# on (cmd/kubelet/app/server.go: "--cgroups-per-qos enabled, but --cgroup-root was not specified.  defaulting to /");
# imageServiceEndpoint '' is the runtime endpoint (pkg/kubelet/kubelet.go: "remoteImageEndpoint is same as
# remoteRuntimeEndpoint if not explicitly specified").
POD_SETTINGS = (("cgroup_driver", "--cgroup-driver", "cgroupDriver", "cgroupfs"),
                ("cgroup_root", "--cgroup-root", "cgroupRoot", ""),
                ("cgroups_per_qos", "--cgroups-per-qos", "cgroupsPerQOS", True),
                ("image_endpoint", "--image-service-endpoint", "imageServiceEndpoint", ""))
BOOL_FLAGS = ("--cgroups-per-qos",)


def _bool(value):
    """A Go flag or YAML boolean (strconv.ParseBool's words), or None when it is not one."""
    if isinstance(value, bool):
        return value
    return {"1": True, "t": True, "true": True, "0": False, "f": False, "false": False}.get(str(value).strip().lower())


def _bool_flag(args, name):
    """The last ``--name`` (true) / ``--name=value`` of a Go boolean flag (pflag takes no separate value), or None."""
    found = None
    for arg in args:
        if arg == name:
            found = "true"
        elif arg.startswith(name + "="):
            found = arg[len(name) + 1:]
    return found


def pod_settings(root, args, whose, where, config=None, config_dir=None):
    """What the kubelet started with ``args`` puts in a Pod's RunPodSandbox and where it pulls, in its precedence (flag,
    over the ``--config-dir`` drop-ins, over the ``--config`` file, over the default): dict per ``POD_SETTINGS`` name
    {value, source}, errors, unknown (why they could not be known: a file of the chain not read; each value None then).
    ``config``/``config_dir``: the files, where the args do not name them (kubeadm's, k3s's drop-ins)."""
    config = flag_value(args, "--config") or config
    config_dir = flag_value(args, "--config-dir") or config_dir
    out, flags = {"errors": [], "unknown": None}, set()
    for name, flag, key, default in POD_SETTINGS:
        given = _bool_flag(args, flag) if flag in BOOL_FLAGS else flag_value(args, flag)
        found = None
        if given is not None:
            found = (given, "%s=%s on %s's command line (%s)" % (flag, given, whose, where))
            flags.add(name)
        if found is None and config_dir:
            value, path, errors = dropins_endpoint(root, config_dir, key)
            out["errors"] += [e for e in errors if e not in out["errors"]]
            if value is not None and not errors:
                found = (value, "%s in %s (%s's --config-dir)" % (key, path, whose))
        if found is None and config and not out["errors"]:
            value, error = file_endpoint(root, config, "kubelet config", key)
            if error:
                out["errors"].append(error)
            elif value != "":
                found = (value, "%s in %s" % (key, config))
        if found is None:
            found = (default, "the KubeletConfiguration default (%s not set)" % key)
        value = _bool(found[0]) if isinstance(default, bool) else str(found[0])
        out[name] = {"value": value, "source": found[1]}
    if out["errors"]:
        out["unknown"] = unknown_because(out["errors"], whose, "its defaults, so none is assumed")
        for name in set(n[0] for n in POD_SETTINGS) - flags:   # a flag is the kubelet's whatever its files say
            out[name] = {"value": None, "source": out["unknown"]}
    return out


def from_files(root="/", which=None):
    """The kubelet as its files say it is started, where none runs: dict installed, evidence, args, unit
    (systemd.exec_start), where (the unit's ExecStart= or kubeadm's files), default_config, errors. ``which``: the
    kubelet binary found on PATH (root / only)."""
    evidence, errors = [], []
    if which:
        evidence.append("kubelet binary %s" % which)
    unit = systemd.exec_start(root, KUBELET_UNIT)
    if unit["unit_file"]:
        evidence.append("unit %s" % unit["unit_file"])
    evidence += ["drop-in %s" % d for d in unit["dropins"]]
    errors += unit["errors"]
    kubeadm_config = nodefs.is_file(root, KUBEADM_CONFIG)
    if kubeadm_config:
        evidence.append(KUBEADM_CONFIG)
    if nodefs.is_file(root, KUBEADM_FLAGS):
        evidence.append(KUBEADM_FLAGS)
    out = {"installed": bool(evidence), "evidence": evidence, "args": [], "where": None, "unit": unit,
           "default_config": KUBEADM_CONFIG if kubeadm_config else None, "errors": errors}
    if unit["argv"]:
        out.update(args=unit["argv"][1:], where=unit["source"])
        return out
    if unit["env"]:
        # drop-ins without an ExecStart= to read (the unit file is elsewhere): their variables are the kubelet's flags
        args = []
        for value in unit["env"].values():
            args.extend(systemd.expand_command(value, {}))
        out.update(args=args, where="the Environment= and EnvironmentFile= values of %s (no ExecStart= found)" % ", ".join(
            ([unit["unit_file"]] if unit["unit_file"] else []) + unit["dropins"] + unit["files"]))
        return out
    # no ExecStart= to read: kubeadm's environment files carry the flags (KUBELET_KUBEADM_ARGS, KUBELET_EXTRA_ARGS)
    args, files = [], []
    for path in KUBEADM_ENV_FILES:
        text = nodefs.read_text(root, path)
        if text is None:
            continue
        files.append(path)
        for value in systemd.parse_env_file(text).values():
            args.extend(systemd.expand_command(value, {}))
    if files:
        out.update(args=args, where=", ".join(files))
    return out


def describe_running(k):
    """'the running kubelet (pid 812, kubelet.service)' / 'the running kubelite (pid 90, --kubelet-args-file ...)'."""
    bits = ["pid %d" % k["pid"]]
    if k.get("unit"):
        bits.append(k["unit"])
    if k.get("args_file"):
        bits.append("--kubelet-args-file %s" % k["args_file"])
    return "the running %s (%s)" % (k["program"], ", ".join(bits))


def exists(root, path):
    return os.path.exists(nodefs.resolve(root, path)[1])
