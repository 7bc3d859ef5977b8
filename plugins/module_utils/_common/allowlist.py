# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the command allowlist of gpuprobe.layers: the only command shapes ``run.run`` starts.

Not public API. ``SHAPES`` lists each allowed shape (its name, the program basenames, a predicate over the
arguments, what it is for): version queries, the engines' info/version/CDI configuration reads, the probe
container (``--rm``, labelled, no network, read-only mounts), removal and listing of the collection's own
containers, the host control probe, kubectl reads and the opt-in Node condition/label write, nvidia-smi queries,
``ldconfig -p``, this boot's kernel log, and DCGM's diagnostic. ``check_allowed`` raises ForbiddenCommand for
anything else; ``run.run`` calls it before a process exists. Pure: nothing here starts a process.
tests/unit/test_safety.py enumerates the shapes with an example each and the commands refused.
"""

from __future__ import annotations

import json
import os
import re

# The probe and every name of a container the collection creates start with this (see _runtime.adapters.container_name).
CONTAINER_PREFIX = "gpuprobe-"
PROBE_SCRIPT = "gpuprobe_probe.py"


class ForbiddenCommand(Exception):
    """Raised when a caller asks to run a command that is not one of the allowed shapes."""


def _options(args, flags_with_value=(), flags=()):
    """Split ``args`` into (options dict, positionals); None when an option is not one of the given ones."""
    opts, pos, i = {}, [], 0
    while i < len(args):
        a = args[i]
        if a.startswith("-") and a != "-":
            key, eq, value = a.partition("=")
            if key in flags_with_value:
                if not eq:
                    if i + 1 >= len(args):
                        return None, None
                    i += 1
                    value = args[i]
                opts.setdefault(key, []).append(value)
            elif key in flags and not eq:
                opts.setdefault(key, []).append(True)
            else:
                return None, None
        else:
            pos.append(a)
        i += 1
    return opts, pos


def _version_only(args):
    return args == ["--version"]


def _engine_info(args):
    templated = len(args) == 3 and args[1] == "--format" and args[2].startswith("{{")
    return args[:1] == ["info"] and (templated or args[1:] in ([], ["--format", "{{json .}}"]))


def _engine_version(args):
    return args in (["version"], ["--version"]) or (len(args) == 3 and args[:2] == ["version", "--format"])


def _container_names_ok(names):
    return bool(names) and all(n.startswith(CONTAINER_PREFIX) for n in names)


def _engine_rm(args):
    if args[:1] != ["rm"]:
        return False
    opts, pos = _options(args[1:], flags_with_value=("-t", "--time"), flags=("-f", "--force", "-i", "--ignore"))
    return opts is not None and ("-f" in opts or "--force" in opts) and _container_names_ok(pos)


def _engine_ps(args):
    if args[:1] != ["ps"]:
        return False
    opts, pos = _options(args[1:], flags_with_value=("--filter", "--format"), flags=("-a", "--all", "--no-trunc"))
    if opts is None or pos or not opts.get("--filter"):
        return False
    return all(re.match(r"^label=gpuprobe\.run(=[A-Za-z0-9_.-]+)?$", f) for f in opts["--filter"])


RUN_VALUE_FLAGS = ("--name", "--label", "--device", "-v", "--volume", "--user", "--entrypoint", "--pull", "--network",
                   "--env", "-e", "--security-opt")
RUN_FLAGS = ("--rm", "-i", "--interactive")


def _engine_run(args):
    """run --rm --name gpuprobe-* --label gpuprobe.run=<id> --network=none ... <image> <probe> <json>:
    the probe container and nothing else (no --privileged, no host namespaces, read-only bind mounts only)."""
    if args[:1] != ["run"]:
        return False
    opts, i = {}, 1
    while i < len(args) and args[i].startswith("-"):
        key, eq, value = args[i].partition("=")
        if key in RUN_VALUE_FLAGS:
            if not eq:
                if i + 1 >= len(args):
                    return False
                i += 1
                value = args[i]
            opts.setdefault(key, []).append(value)
        elif key in RUN_FLAGS and not eq:
            opts[key] = [True]
        else:
            return False
        i += 1
    if i >= len(args):  # no image
        return False
    if "--rm" not in opts or opts.get("--network") != ["none"] or not _container_names_ok(opts.get("--name") or []):
        return False
    labels = opts.get("--label") or []
    if not any(re.match(r"^gpuprobe\.run=[A-Za-z0-9_.-]+$", lab) for lab in labels):
        return False
    if any(not lab.startswith("gpuprobe.") for lab in labels):
        return False
    if any(not v.endswith(":ro") for v in (opts.get("-v") or []) + (opts.get("--volume") or [])):
        return False
    if any(o not in ("label=disable",) for o in opts.get("--security-opt") or []):
        return False
    return True


def _python_probe(args):
    """<python> -I -S <dir>/gpuprobe_probe.py <json object>: the compute probe on the host (the control), in an
    isolated interpreter (no PYTHON* environment, no site)."""
    if len(args) != 4 or args[:2] != ["-I", "-S"] or os.path.basename(args[2]) != PROBE_SCRIPT:
        return False
    try:
        return isinstance(json.loads(args[3]), dict)
    except ValueError:
        return False


KUBECTL_READS = (["version", "--client"], ["get", "nodes"], ["get", "pods"], ["get", "events"],
                 ["get", "resourceslices"], ["get", "deviceclasses"], ["get", "resourceclaims"],
                 ["get", "resourceclaimtemplates"], ["get", "runtimeclasses"])
KUBECTL_BASE = ("--kubeconfig", "--context", "--request-timeout")


def _kubectl(args):
    """kubectl [--kubeconfig F] [--context C] [--request-timeout Ns] (version --client | get nodes|pods|events|
    resourceslices|deviceclasses|resourceclaims|resourceclaimtemplates|runtimeclasses) [-n NS | --all-namespaces]
    [--field-selector S] -o json: reads only."""
    opts, pos = _options(args, flags_with_value=KUBECTL_BASE + ("-n", "--field-selector", "-o"),
                         flags=("--all-namespaces", "--client"))
    if opts is None or opts.get("-o") != ["json"]:
        return False
    if pos == ["version"]:
        return "--client" in opts
    return pos in KUBECTL_READS[1:] and "--client" not in opts


# Node conditions the kubelet owns: the node lifecycle controller taints and evicts on them, so nothing of ours
# writes one (k8s.io/api core/v1 NodeConditionType: NodeReady, NodeMemoryPressure, NodeDiskPressure,
# NodePIDPressure, NodeNetworkUnavailable).
KUBELET_CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure", "NetworkUnavailable")
# the fields of a NodeCondition (core/v1 types.go); a strategic merge directive ($patch, $retainKeys, ...) is none
CONDITION_KEYS = ("type", "status", "reason", "message", "lastHeartbeatTime", "lastTransitionTime")
CONDITION_STATUSES = ("True", "False", "Unknown")
# label and condition prefixes reserved for Kubernetes' own components (kubernetes.io, k8s.io and their subdomains)
RESERVED_DOMAINS = ("kubernetes.io", "k8s.io")


def reserved_prefix(key):
    """The reserved domain ``key``'s prefix is in (``node-role.kubernetes.io/x`` -> kubernetes.io), or None."""
    key = str(key or "")
    if "/" not in key:
        return None
    prefix = key.split("/", 1)[0].lower()
    for domain in RESERVED_DOMAINS:
        if prefix == domain or prefix.endswith("." + domain):
            return domain
    return None


def node_condition_type_refused(ctype):
    """Why a Node condition of type ``ctype`` may not be written by gpuprobe.layers, or None."""
    if str(ctype).lower() in (c.lower() for c in KUBELET_CONDITIONS):
        return "condition type %s is the kubelet's own (%s): writing it taints or evicts the node" % (
            ctype, ", ".join(KUBELET_CONDITIONS))
    if reserved_prefix(ctype):
        return "condition type %s is in the namespace %s reserved for Kubernetes" % (ctype, reserved_prefix(ctype))
    return None


def _node_status_patch(body):
    """{"status": {"conditions": [one condition]}}: nothing else of the Node's status; the condition has only a
    NodeCondition's string fields (no $patch or other directive), a status True/False/Unknown, and a type that is
    not the kubelet's nor in a reserved namespace."""
    status = body.get("status") if list(body) == ["status"] else None
    conditions = status.get("conditions") if isinstance(status, dict) and list(status) == ["conditions"] else None
    if not (isinstance(conditions, list) and len(conditions) == 1 and isinstance(conditions[0], dict)):
        return False
    cond = conditions[0]
    if not isinstance(cond.get("type"), str) or not set(cond) <= set(CONDITION_KEYS):
        return False
    if not all(isinstance(v, str) for v in cond.values()) or cond.get("status") not in CONDITION_STATUSES:
        return False
    return node_condition_type_refused(cond["type"]) is None


def _node_label_patch(body):
    """{"metadata": {"labels": {one key: a string value}}}: one label, nothing else (no taint, no spec), and not a
    key in a namespace reserved for Kubernetes (kubernetes.io/, *.kubernetes.io/, k8s.io/, *.k8s.io/)."""
    meta = body.get("metadata") if list(body) == ["metadata"] else None
    labels = meta.get("labels") if isinstance(meta, dict) and list(meta) == ["labels"] else None
    if not isinstance(labels, dict) or len(labels) != 1 or not all(isinstance(v, str) for v in labels.values()):
        return False
    return not any(reserved_prefix(k) or k.startswith("$") for k in labels)


def _kubectl_node_write(args):
    """kubectl [--kubeconfig F] [--context C] [--request-timeout Ns] patch node NAME then either
    --subresource=status --type=strategic -p '{"status":{"conditions":[{...}]}}' (one Node condition) or
    --type=merge -p '{"metadata":{"labels":{"k":"v"}}}' (one label), -o json. Nothing else: no Pod, no taint, no spec."""
    opts, pos = _options(args, flags_with_value=KUBECTL_BASE + ("--subresource", "--type", "-p", "-o"))
    if opts is None or opts.get("-o") != ["json"] or len(pos) != 3 or pos[:2] != ["patch", "node"]:
        return False
    if any(len(v) != 1 for v in opts.values()) or not opts.get("-p"):
        return False
    try:
        body = json.loads(opts["-p"][0])
    except ValueError:
        return False
    if not isinstance(body, dict):
        return False
    if opts.get("--subresource") == ["status"]:
        return opts.get("--type") == ["strategic"] and _node_status_patch(body)
    return "--subresource" not in opts and opts.get("--type") == ["merge"] and _node_label_patch(body)


NVIDIA_SMI_QUERY_FLAGS = ("-L", "--list-gpus", "-q", "--query", "-x", "--xml-format")
NVIDIA_SMI_QUERY_VALUES = ("--query-gpu", "--query-compute-apps", "--format", "-i", "--id", "-d", "--display")


def _nvidia_smi(args):
    """nvidia-smi queries only: -L, -q [-x] [-d ...], --query-gpu=... / --query-compute-apps=... --format=...,
    [-i N]; no subcommand (mig, drain, ...) and no setting (-pm, -c, -r, -e, -mig, ...)."""
    if not args:
        return True
    opts, pos = _options(args, flags_with_value=NVIDIA_SMI_QUERY_VALUES, flags=NVIDIA_SMI_QUERY_FLAGS)
    return opts is not None and not pos


def _ldconfig(args):
    return args == ["-p"]


def _journal_kernel(args):
    """journalctl -k -b --no-pager -q -o cat: this boot's kernel messages, read only."""
    return args == ["-k", "-b", "--no-pager", "-q", "-o", "cat"]


def _dmesg_read(args):
    """dmesg --notime: the kernel ring buffer, read only (no -c/-C clear, no -n level, no -D/-E console)."""
    return args == ["--notime"]


def _dcgmi_diag(args):
    """dcgmi diag -r <1-4> -j: DCGM's diagnostic at the run level the user asked for (host.health.dcgm_diag), JSON out;
    no other dcgmi subcommand (no config, policy, group or health settings)."""
    return len(args) == 4 and args[:2] == ["diag", "-r"] and args[2] in ("1", "2", "3", "4") and args[3] == "-j"


def _engine_config(args):
    """The engine's CDI configuration, read only: containerd [--config F] config dump | containerd config default
    (prints, starts nothing); crio status [--socket S] config (asks the running server)."""
    if args == ["config", "default"]:
        return True
    if args[-2:] == ["config", "dump"]:
        return args[:-2] == [] or (len(args) == 4 and args[0] == "--config")
    if args[:1] == ["status"] and args[-1:] == ["config"]:
        return args[1:-1] == [] or (len(args) == 4 and args[1] == "--socket")
    return False


# (shape name, program basenames, predicate over argv[1:], what it is for). tests/unit/test_safety.py enumerates these.
SHAPES = (
    ("tool --version", ("nvidia-ctk", "podman", "docker", "containerd", "runc", "crun", "crio", "nerdctl", "crictl"),
     _version_only, "host layer: versions of the container tools"),
    ("engine info", ("podman", "docker"), _engine_info, "runtime layer: detect the runtime"),
    ("engine version", ("podman", "docker"), _engine_version, "runtime layer: the runtime's version"),
    ("engine config read", ("containerd", "crio"), _engine_config,
     "cdi layer: the engine's own CDI configuration (containerd config dump/default, crio status config)"),
    ("engine run probe", ("podman", "docker"), _engine_run, "runtime layer: the probe container (--rm, labelled, no network)"),
    ("engine rm gpuprobe-*", ("podman", "docker"), _engine_rm, "cleanup: force-remove probe containers by name"),
    ("engine ps label=gpuprobe.run", ("podman", "docker"), _engine_ps, "cleanup: list probe containers by label"),
    ("python probe", ("python", "python3", "python3.*", "platform-python"), _python_probe, "compute layer: the host control probe"),
    ("kubectl read", ("kubectl",), _kubectl,
     "k8s layer: version, get nodes/pods/events, the DRA objects (resource.k8s.io) and the RuntimeClasses as JSON"),
    ("kubectl node condition write", ("kubectl",), _kubectl_node_write,
     "k8s_publish (opt-in): one Node condition through the status subresource, or one Node label"),
    ("nvidia-smi query", ("nvidia-smi",), _nvidia_smi, "read-only GPU queries"),
    ("ldconfig -p", ("ldconfig",), _ldconfig, "which libraries the loader knows"),
    ("journalctl kernel log", ("journalctl",), _journal_kernel, "host layer: NVRM Xid lines of this boot (host.health.xid)"),
    ("dmesg read", ("dmesg",), _dmesg_read, "host layer: NVRM Xid lines when there is no journal (host.health.xid)"),
    ("dcgmi diag", ("dcgmi",), _dcgmi_diag, "host layer: DCGM's diagnostic where asked (host.health.dcgm_diag)"),
)


def _program_matches(name, programs):
    for p in programs:
        if p == name or (p.endswith("*") and name.startswith(p[:-1]) and re.match(r"^[0-9.]+$", name[len(p) - 1:])):
            return True
    return False


def allowed_shape(argv):
    """The name of the allowed shape ``argv`` has, or None."""
    if not argv:
        return None
    name = os.path.basename(str(argv[0]))
    args = [str(a) for a in argv[1:]]
    for shape, programs, predicate, _what in SHAPES:
        if _program_matches(name, programs) and predicate(args):
            return shape
    return None


def check_allowed(argv):
    """Raise ForbiddenCommand unless ``argv`` has one of the allowed shapes; returns the shape's name."""
    if not argv:
        raise ForbiddenCommand("empty command")
    shape = allowed_shape(argv)
    if shape is None:
        raise ForbiddenCommand("gpuprobe.layers refuses to run %s: not an allowed command shape (%s)" % (
            " ".join(str(a) for a in argv)[:300], "; ".join(s[0] for s in SHAPES)))
    return shape
