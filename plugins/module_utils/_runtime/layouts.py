# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the runtime path a node's Pods take, on the node layouts fleets run. Not public API.

``discover(root)`` reads the running system first (``_runtime.kubelet``: the kubelet process and its arguments;
``_runtime.daemons``: the containerd and CRI-O processes and their sockets), then the files that start them:

- kubeadm, Kubespray, OpenShift, RKE2, MicroK8s: a kubelet process (RKE2 starts ``kubelet`` as a child of
  ``rke2 server|agent``, its endpoint in the ``--config-dir`` drop-in RKE2 writes; MicroK8s runs ``kubelite`` with
  ``--kubelet-args-file``); not running: the ``kubelet.service`` unit with its drop-ins and environment files
  (Kubespray's ``/etc/kubernetes/kubelet.env``, kubeadm's ``kubeadm-flags.env``);
- k3s: the kubelet runs inside ``k3s server|agent`` (no kubelet process, binary or unit) and k3s erases its own
  arguments from /proc. Its endpoint, in the kubelet's precedence: a ``kubelet-arg`` ``container-runtime-endpoint``
  (while k3s runs, only from a file not changed since the drop-ins k3s wrote at its start: a later edit is the next
  start's, named in the notes), else the KubeletConfiguration drop-ins k3s writes at start (``<data-dir>/agent/etc/kubelet.conf.d``,
  ``00-k3s-defaults.conf``), else k3s's own rule: ``container-runtime-endpoint``, else with ``docker``
  ``unix:///run/k3s/cri-dockerd/cri-dockerd.sock``, else its bundled containerd
  ``unix:///run/k3s/containerd/containerd.sock``. k3s's options are its configuration file (``K3S_CONFIG_FILE``,
  default ``/etc/rancher/k3s/config.yaml``, then ``config.yaml.d/*.yaml`` in order, a ``key+`` appending) under the
  flags of its unit's ``ExecStart=`` (k3s pkg/configfilearg). RKE2 follows the same rules under ``rke2`` names.

The layout names the distribution by what was found (a ``k3s``/``rke2``/``kubelite`` process, their files, the
kubelet's unit); it only labels the sentence: the endpoint always comes from the rules above.
"""

from __future__ import annotations

import os

from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import daemons as _daemons
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import kubelet as _kubelet
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import nodefs, systemd

RANCHER = {
    "k3s": {"config": "/etc/rancher/k3s/config.yaml", "data_dir": "/var/lib/rancher/k3s", "env": "K3S_CONFIG_FILE",
            "units": ("k3s.service", "k3s-agent.service"), "socket": "unix:///run/k3s/containerd/containerd.sock"},
    "rke2": {"config": "/etc/rancher/rke2/config.yaml", "data_dir": "/var/lib/rancher/rke2", "env": "RKE2_CONFIG_FILE",
             "units": ("rke2-server.service", "rke2-agent.service"), "socket": "unix:///run/k3s/containerd/containerd.sock"},
}
CRI_DOCKERD = "unix:///run/k3s/cri-dockerd/cri-dockerd.sock"
MICROK8S_ARGS = "/var/snap/microk8s/current/args/kubelet"
KUBESPRAY_ENV = "/etc/kubernetes/kubelet.env"
OPENSHIFT_KUBELET_CONFIG = "/etc/kubernetes/kubelet.conf"


def _yaml_docs(root, paths, errors):
    try:
        import yaml  # pylint: disable=import-outside-toplevel
    except ImportError:  # pragma: no cover - PyYAML comes with ansible-core
        errors.append("no YAML reader to read %s" % ", ".join(paths))
        return []
    out = []
    for path in paths:
        text = nodefs.read_text(root, path)
        try:
            doc = yaml.safe_load(text) if text is not None else None
        except yaml.YAMLError as exc:
            errors.append("%s not understood (YAML): %s" % (path, str(exc).splitlines()[0]))
            continue
        if text is None:
            errors.append("%s not readable" % path)
        elif isinstance(doc, dict):
            out.append((path, doc))
        elif doc is not None:
            errors.append("%s is not a mapping" % path)
    return out


def rancher_options(root, dist, environ=None, cli=None):
    """k3s's (or RKE2's) options as it parses them: dict values {key: value or list}, files (read, in order), cli
    (the flags after server/agent), errors. ``environ``: the process's (or unit's) environment; ``cli``: the
    arguments of its command line after the subcommand."""
    info = RANCHER[dist]
    errors = []
    config = (environ or {}).get(info["env"]) or info["config"]
    dropdir = config + ".d"
    files = ([config] if nodefs.is_file(root, config) else []) + [
        "%s/%s" % (dropdir, n) for n in nodefs.list_dir(root, dropdir) if n.lower().endswith((".yaml", ".yml"))]
    values, origins = {}, {}
    for path, doc in _yaml_docs(root, files, errors):
        for key, value in doc.items():
            key = str(key)
            append = key.endswith("+")
            key = key.rstrip("+")
            items = value if isinstance(value, list) else [value]
            if append and key in values:
                old = values[key] if isinstance(values[key], list) else [values[key]]
                values[key] = old + items
                origins[key] = origins.get(key, []) + [path] * len(items)
            else:
                values[key] = value
                origins[key] = [path] * len(items)
    # the command line's flags come after the file's (k3s pkg/configfilearg): a string flag's last value wins,
    # a slice flag (kubelet-arg) appends
    args = list(cli or [])
    i = 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("-"):
            key, sep, value = arg.lstrip("-").partition("=")
            if not sep:
                if i + 1 < len(args) and not args[i + 1].startswith("-") and key not in ("docker",):
                    value = args[i + 1]
                    i += 1
                else:
                    value = True
            key = {"d": "data-dir", "c": "config"}.get(key, key)
            if key == "kubelet-arg":
                old = values.get(key) or []
                values[key] = (old if isinstance(old, list) else [old]) + [value]
                origins[key] = origins.get(key, []) + ["the command line"]
            else:
                values[key] = value
                origins[key] = ["the command line"]
        i += 1
    return {"values": values, "origins": origins, "files": [f for f in files if nodefs.is_file(root, f)], "errors": errors,
            "config": config}


def _kubelet_arg(opts):
    """(value, origin) of a container-runtime-endpoint kubelet-arg (the last; origin: the file that set it, or 'the
    command line'), or (None, None)."""
    found = (None, None)
    args = opts["values"].get("kubelet-arg") or []
    args = args if isinstance(args, list) else [args]
    origins = (opts.get("origins") or {}).get("kubelet-arg") or []
    for i, arg in enumerate(args):
        key, _sep, value = str(arg).lstrip("-").partition("=")
        if key == "container-runtime-endpoint":
            found = (value, origins[i] if i < len(origins) else None)
    return found


def _changed_since(root, path, than):
    """Whether the node file ``path`` was modified after ``than`` (a file k3s writes at every start)."""
    try:
        return os.stat(nodefs.resolve(root, path)[1]).st_mtime > os.stat(nodefs.resolve(root, than)[1]).st_mtime
    except (OSError, TypeError, ValueError):
        return False


def _conf_d(dist, opts):
    """The kubelet configuration drop-in directory k3s (RKE2) writes at start."""
    data_dir = str(opts["values"].get("data-dir") or RANCHER[dist]["data_dir"])
    return "%s/agent/etc/kubelet.conf.d" % data_dir.rstrip("/")


def rancher_endpoint(root, dist, opts, running=False):
    """The endpoint of k3s's (RKE2's) kubelet from its options and the drop-ins it writes: dict endpoint, source,
    errors, notes, pod (``_kubelet.pod_settings``: its kubelet-args over those drop-ins). ``running``: k3s runs, so the
    drop-ins it wrote at its start are the live state, and a kubelet-arg in a configuration file changed after them is
    the next start's (said in ``notes``), not the running kubelet's."""
    out = _rancher_endpoint(root, dist, opts, running)
    args = opts["values"].get("kubelet-arg") or []
    args = ["--" + str(a).lstrip("-") for a in (args if isinstance(args, list) else [args])]
    out["pod"] = _kubelet.pod_settings(root, args, "the kubelet inside %s" % dist, "its kubelet-arg options",
                                       config_dir=_conf_d(dist, opts))
    return out


def _rancher_endpoint(root, dist, opts, running):
    values = opts["values"]
    conf_d = _conf_d(dist, opts)
    from_files = "%s's options (%s)" % (dist, ", ".join(opts["files"]) or "no configuration file")
    arg, origin = _kubelet_arg(opts)
    value, path, errors = _kubelet.dropins_endpoint(root, conf_d)
    notes = []
    if arg and running and value and origin in opts["files"] and _changed_since(root, origin, path):
        notes.append("kubelet-arg container-runtime-endpoint=%s in %s was written after %s started (after the drop-in %s "
                     "it wrote then): it is the next start's endpoint, not the running kubelet's" % (arg, origin, dist, path))
    elif arg:
        return {"endpoint": _kubelet.normalize_endpoint(arg), "source": "kubelet-arg container-runtime-endpoint=%s in %s" % (arg, from_files)}
    if errors:
        why = _kubelet.unknown_because(errors, "the kubelet inside %s" % dist)
        return {"endpoint": None, "unknown": why, "source": why, "errors": errors}
    if value:
        return {"endpoint": _kubelet.normalize_endpoint(value), "errors": errors, "notes": notes, "source": "containerRuntimeEndpoint in "
                "%s, in the kubelet configuration drop-ins %s writes at start (%s)" % (path, dist, conf_d)}
    cre = values.get("container-runtime-endpoint")
    if cre:
        return {"endpoint": _kubelet.normalize_endpoint(cre), "source": "container-runtime-endpoint in %s" % from_files}
    if values.get("docker") in (True, "true"):
        return {"endpoint": CRI_DOCKERD, "source": "docker in %s: %s runs cri-dockerd" % (from_files, dist)}
    return {"endpoint": RANCHER[dist]["socket"], "source": "%s's bundled containerd (no container-runtime-endpoint, no "
            "docker in %s; no %s)" % (dist, from_files, conf_d)}


def _rancher_process(procs):
    for p in procs:
        argv = p["argv"]
        if p["name"] in RANCHER and argv[1:2] and argv[1] in ("server", "agent"):
            return p["name"], p
    return None, None


def _rancher_installed(root):
    for dist, info in RANCHER.items():
        if nodefs.is_file(root, info["config"]) or nodefs.is_dir(root, info["config"] + ".d") or any(
                systemd.unit_files(root, u)[0] for u in info["units"]):
            return dist
    return None


def distribution(root="/", procs=None):
    """(name, evidence) of the distribution that runs or is installed here, among those whose own files name the GPU
    Pods' handler and hold an admin kubeconfig: 'k3s', 'rke2' (a ``k3s``/``rke2 server|agent`` process, else their
    configuration or unit), 'microk8s' (``kubelite``, else its args file); (None, None) for any other node."""
    procs = nodefs.processes(root) if procs is None else procs
    dist, proc = _rancher_process(procs)
    if proc:
        return dist, "%s %s (pid %d)" % (dist, proc["argv"][1], proc["pid"])
    for p in procs:
        if p["name"] == "kubelite":
            return "microk8s", "kubelite (pid %d)" % p["pid"]
    dist = _rancher_installed(root)
    if dist:
        return dist, "%s installed (%s)" % (dist, RANCHER[dist]["config"])
    if nodefs.is_file(root, MICROK8S_ARGS):
        return "microk8s", MICROK8S_ARGS
    return None, None


def _rancher_unit(root, dist, pid=None):
    unit = nodefs.proc_unit(root, pid) if pid else None
    for name in ([unit] if unit else []) + list(RANCHER[dist]["units"]):
        start = systemd.exec_start(root, name)
        if start["argv"]:
            return start
    return None


def _layout(root, kubelet_argv, unit):
    """The layout a kubelet's argv and unit show (when no k3s/RKE2/MicroK8s process or file named it)."""
    argv = kubelet_argv or []
    text = " ".join(argv)
    if "/var/lib/rancher/rke2" in text:
        return "rke2"
    if "/var/lib/rancher/k3s" in text:
        return "k3s"
    if argv[:1] and argv[0].endswith(("hyperkube", "kubenswrapper")) or \
            nodefs.flag_value(argv, "--config") == OPENSHIFT_KUBELET_CONFIG:
        return "openshift"
    files = (unit or {}).get("files") or []
    if any(f.startswith("/etc/eks/") for f in files):
        return "eks"
    if KUBESPRAY_ENV in files or nodefs.is_file(root, KUBESPRAY_ENV):
        return "kubespray"
    if any(d.endswith("/10-kubeadm.conf") for d in (unit or {}).get("dropins") or []) or nodefs.is_file(root, _kubelet.KUBEADM_FLAGS):
        return "kubeadm"
    return "kubelet"


def _daemon_match(out, root):
    running = out["daemons"]
    for d in running:
        d["serves"] = bool(d.get("socket")) and d["engine"] != "dockerd" and nodefs.same_socket(out["endpoint"], d["socket"], root)[0]
    serving = [d for d in running if d.get("serves")]
    out["serving"] = serving[0] if serving else None
    others = [d for d in running if not d.get("serves")]
    if others and out["serving"]:
        # (none serving: the selection's sentence names the daemons that run and do not serve the endpoint)
        out["notes"].append("also running, not the kubelet's: %s" % "; ".join(_daemons.label(d) for d in others))


def _from_running_kubelet(root, out, k, rancher):
    if k["program"] == "kubelite":
        whose, where = "the running kubelite", "its --kubelet-args-file %s" % k["args_file"]
    else:
        whose, where = "the running kubelet", "/proc/%d/cmdline" % k["pid"]
    found = _kubelet.endpoint_of_args(root, k["args"], whose, where)
    out["errors"] += k["errors"]
    unit = systemd.exec_start(root, k["unit"]) if k.get("unit") else None
    dist = rancher[0] if rancher[1] else None
    out["layout"] = "microk8s" if k["program"] == "kubelite" else (dist or _layout(root, k["argv"], unit))
    how = _kubelet.describe_running(k)
    if dist:
        how += ", %s %s %s (pid %d)" % ("started by" if nodefs.proc_ppid(root, k["pid"]) == rancher[1]["pid"] else "beside",
                                        dist, rancher[1]["argv"][1], rancher[1]["pid"])
    out["kubelet"] = {"how": how, "pid": k["pid"], "program": k["program"], "argv": k["argv"]}
    out["evidence"].append(how)
    return found


def _from_rancher_process(root, out, dist, proc):
    sub = proc["argv"][1]
    unit = _rancher_unit(root, dist, proc["pid"])
    environ = dict((unit or {}).get("env") or {}, **nodefs.proc_environ(root, proc["pid"]))
    cli = (unit or {}).get("argv") or []
    cli = cli[cli.index(sub) + 1:] if sub in cli else []
    opts = rancher_options(root, dist, environ, cli)
    out["errors"] += opts["errors"]
    read = ([unit["source"]] if unit and unit.get("source") else []) + opts["files"]
    how = "the kubelet inside %s %s (pid %d, whose arguments %s erases from /proc: its options were read from %s)" % (
        dist, sub, proc["pid"], dist, ", ".join(read) or "nowhere, no unit and no configuration file: its defaults")
    out["kubelet"] = {"how": how, "pid": proc["pid"], "program": "%s %s" % (dist, sub), "argv": proc["argv"]}
    out["evidence"].append("%s %s (pid %d)" % (dist, sub, proc["pid"]))
    out["layout"] = dist
    return rancher_endpoint(root, dist, opts, running=True)


def _from_files(root, out, which_kubelet):
    installed = _rancher_installed(root)
    files = _kubelet.from_files(root, which_kubelet)
    if installed and not files["installed"]:
        unit = _rancher_unit(root, installed)
        cli = (unit or {}).get("argv") or []
        sub = [a for a in cli if a in ("server", "agent")]
        opts = rancher_options(root, installed, (unit or {}).get("env"), cli[cli.index(sub[0]) + 1:] if sub else [])
        out["errors"] += opts["errors"]
        read = ([unit["source"]] if unit and unit.get("source") else []) + opts["files"]
        out["kubelet"] = {"how": "the kubelet of %s, installed but not running (its options: %s)" % (installed, ", ".join(read) or "its defaults"),
                          "pid": None, "program": installed, "argv": None}
        out["evidence"].append("%s installed, not running" % installed)
        out["layout"] = installed
        return rancher_endpoint(root, installed, opts)
    if files["installed"]:
        out["errors"] += files["errors"]
        argv = files["unit"]["argv"] or []
        unit = files["unit"]
        found = _kubelet.endpoint_of_args(root, files["args"], "kubelet.service" if unit["unit_file"] or unit["dropins"] else "kubeadm's files",
                                          files["where"] or "no ExecStart= and no flags file", default_config=files["default_config"])
        out["layout"] = _layout(root, argv[:1] + files["args"], files["unit"])
        out["evidence"] += files["evidence"]
        out["kubelet"] = {"how": "the kubelet, not running (a kubelet is installed: %s)" % ", ".join(files["evidence"]), "pid": None,
                          "program": "kubelet", "argv": None}
        return found
    if nodefs.is_file(root, MICROK8S_ARGS):
        args = _kubelet.kubelite_args(root, MICROK8S_ARGS, {}) or []
        out["layout"] = "microk8s"
        out["evidence"].append(MICROK8S_ARGS)
        out["kubelet"] = {"how": "MicroK8s' kubelet, kubelite not running (%s)" % MICROK8S_ARGS, "pid": None,
                          "program": "kubelite", "argv": None}
        return _kubelet.endpoint_of_args(root, args, "kubelite", "its --kubelet-args-file %s, kubelite not running" % MICROK8S_ARGS)
    return None


def discover(root="/", which_kubelet=None, procs=None):
    """The runtime path this node's Pods take. dict:

    - installed (a kubelet runs or is installed), evidence; kubelet: None, or how it was found (``how``: a sentence,
      ``pid``, ``program``, ``argv``);
    - layout: 'kubeadm', 'kubespray', 'k3s', 'rke2', 'microk8s', 'openshift', 'eks', 'kubelet' (none of those), or None;
    - endpoint (the kubelet's, as it names it, unix://...), source (a sentence: where it comes from), socket (its real
      path on the node, links followed); unknown: why the endpoint could not be known (a file of the kubelet's that
      cannot be read here), endpoint None then;
    - daemons: the running containerd/CRI-O/dockerd (``_runtime.daemons.running``), each with ``serves``: whether it
      serves the kubelet's endpoint (socket identity, ``nodefs.same_socket``); serving: that daemon or None;
    - pod: what the kubelet sends in a Pod's RunPodSandbox and where it pulls (``_kubelet.pod_settings``: cgroup
      driver, root, cgroupsPerQOS, image service endpoint), None where no kubelet was found;
    - errors; notes (the other daemons, said plainly).

    ``procs``: the processes to consider (``nodefs.processes`` dicts; default: every process under <root>/proc).
    """
    procs = nodefs.processes(root) if procs is None else procs
    out = {"installed": False, "evidence": [], "kubelet": None, "layout": None, "endpoint": None, "source": None,
           "unknown": None, "socket": None, "daemons": _daemons.running(root, procs), "serving": None, "errors": [], "notes": [],
           "pod": None}
    k = _kubelet.running(root, procs)
    rancher = _rancher_process(procs)
    if k:
        found = _from_running_kubelet(root, out, k, rancher)
    elif rancher[1]:
        found = _from_rancher_process(root, out, rancher[0], rancher[1])
    else:
        found = _from_files(root, out, which_kubelet)
    if found is None:
        return out
    out["installed"] = True
    out["errors"] += [e for e in found.get("errors") or [] if e not in out["errors"]]
    out["notes"] += found.get("notes") or []
    out.update(endpoint=found["endpoint"], source=found["source"], unknown=found.get("unknown"))
    out["pod"] = found.get("pod")
    if out["unknown"]:
        # no endpoint to match: every daemon that runs is a candidate, none is the kubelet's by assumption
        for d in out["daemons"]:
            d["serves"] = False
        return out
    out["socket"] = nodefs.identity(root, out["endpoint"])[0]
    _daemon_match(out, root)
    return out
