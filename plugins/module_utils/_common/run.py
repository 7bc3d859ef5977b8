# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the one place where gpuprobe.layers runs external programs.

Not public API. ``run`` runs only the command shapes listed in ``SHAPES`` (an allowlist: the commands the
layers need, nothing else; anything else raises ForbiddenCommand before a process exists). It always has a
timeout, kills the whole process group when it expires and when the caller is interrupted (KeyboardInterrupt,
SystemExit, any exception: the group is killed, then the exception goes on), never raises for a missing
program or a hang, and keeps at most ``MAX_CAPTURE`` bytes of the head and of the tail of each output stream
(the rest is counted, not kept, except the lines a caller asks to keep: ``keep_prefix``).
"""

from __future__ import annotations

import collections
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time

DEFAULT_TIMEOUT = 30.0
MAX_CAPTURE = 4 * 1024 * 1024   # bytes kept of the head, and again of the tail, of each stream
CHUNK = 64 * 1024
# The probe and every name of a container the collection creates start with this (see _runtime.container_name).
CONTAINER_PREFIX = "gpuprobe-"
PROBE_SCRIPT = "gpuprobe_probe.py"


class ForbiddenCommand(Exception):
    """Raised when a caller asks to run a command that is not one of the allowed shapes."""


# ---- the allowlist -------------------------------------------------------------------------------------------

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
    return args[:1] == ["info"] and (args[1:] in ([], ["--format", "{{json .}}"])
                                     or (len(args) == 3 and args[1] == "--format" and args[2].startswith("{{")))


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
                 ["get", "resourceclaimtemplates"])
KUBECTL_BASE = ("--kubeconfig", "--context", "--request-timeout")


def _kubectl(args):
    """kubectl [--kubeconfig F] [--context C] [--request-timeout Ns] (version --client | get nodes|pods|events|
    resourceslices|deviceclasses|resourceclaims|resourceclaimtemplates) [-n NS | --all-namespaces]
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
    return (isinstance(cond.get("type"), str) and set(cond) <= set(CONDITION_KEYS)
            and all(isinstance(v, str) for v in cond.values()) and cond.get("status") in CONDITION_STATUSES
            and node_condition_type_refused(cond["type"]) is None)


def _node_label_patch(body):
    """{"metadata": {"labels": {one key: a string value}}}: one label, nothing else (no taint, no spec), and not a
    key in a namespace reserved for Kubernetes (kubernetes.io/, *.kubernetes.io/, k8s.io/, *.k8s.io/)."""
    meta = body.get("metadata") if list(body) == ["metadata"] else None
    labels = meta.get("labels") if isinstance(meta, dict) and list(meta) == ["labels"] else None
    return (isinstance(labels, dict) and len(labels) == 1 and all(isinstance(v, str) for v in labels.values())
            and not any(reserved_prefix(k) or k.startswith("$") for k in labels))


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
     "k8s layer: version, get nodes/pods/events and the DRA objects (resource.k8s.io) as JSON"),
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


# ---- execution ---------------------------------------------------------------------------------------------------

KEEP_LIMIT = 8 * 1024 * 1024   # bytes of kept lines (``keep_prefix``) from the omitted middle of a stream
KEEP_LINES = 20000             # and lines (the probe prints a few per step and GPU)


class _Capture(object):
    """Keeps the first and the last ``limit`` bytes of a stream and counts the rest. With ``keep_prefix`` (bytes),
    every line that starts with it is also kept whole wherever it is (up to ``keep_limit`` bytes of such lines), so
    that a probe's JSON lines in the middle of a flood of other output are never dropped with that middle."""

    def __init__(self, limit, keep_prefix=None, keep_limit=KEEP_LIMIT):
        self.limit = limit
        self.head = bytearray()
        self.tail = collections.deque()
        self.tail_len = 0
        self.total = 0
        self.prefix = keep_prefix
        self.keep_limit = keep_limit
        self.lines = []          # (start offset, bytes) of the lines that start with keep_prefix
        self.kept_bytes = 0
        self.kept_dropped = 0    # such lines not kept: keep_limit reached
        self.line_start = 0
        self.cur = None          # the current line while it may be (or is) one to keep
        self.keep = None         # None: undecided (shorter than the prefix so far)
        self.at_start = True     # the next byte begins a line

    def feed(self, data):
        if self.prefix and not self.kept_dropped:  # once the keep limit is reached, no more lines are kept
            self._scan(data)
        self.total += len(data)
        room = self.limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail.append(data)
            self.tail_len += len(data)
            while self.tail_len - len(self.tail[0]) >= self.limit:
                self.tail_len -= len(self.tail.popleft())

    def _scan(self, data):
        """Find the lines that start with the prefix (C-speed searches between them; Python work per kept line)."""
        prefix, n, pos = self.prefix, len(data), 0
        while pos < n:
            if self.cur is not None:  # inside a line that starts (or may start) with the prefix
                nl = data.find(b"\n", pos)
                end = n if nl < 0 else nl + 1
                self.cur += data[pos:end]
                if self.keep is None and len(self.cur) >= len(prefix):
                    self.keep = self.cur.startswith(prefix)
                if self.keep and (self.kept_bytes + len(self.cur) > self.keep_limit or len(self.lines) >= KEEP_LINES):
                    self.kept_dropped += 1
                    self.cur = None
                    return
                if self.keep is False:
                    self.cur = None
                if nl < 0:
                    return
                if self.cur is not None and self.cur.startswith(prefix):
                    self.lines.append((self.line_start, bytes(self.cur)))
                    self.kept_bytes += len(self.cur)
                self.cur, self.keep, self.at_start, pos = None, None, True, end
            elif self.at_start:
                rest = data[pos:pos + len(prefix)]
                self.at_start = False
                if rest == prefix or (len(rest) == n - pos and prefix.startswith(rest)):
                    self.cur, self.keep, self.line_start = bytearray(), None, self.total + pos
            else:
                idx = data.find(b"\n" + prefix, pos)
                if idx >= 0:
                    pos, self.at_start = idx + 1, True
                    continue
                last = data.rfind(b"\n", pos)
                if last >= 0 and prefix.startswith(data[last + 1:]):  # a line that may start with it at the end
                    pos, self.at_start = last + 1, True
                    continue
                return

    def text(self):
        tail = b"".join(self.tail)
        if len(tail) > self.limit:
            tail = tail[-self.limit:]
        omitted = self.total - len(self.head) - len(tail)
        if omitted > 0:
            tail_start = self.total - len(tail)
            lines = list(self.lines)
            if self.cur and self.cur.startswith(self.prefix or b"\0"):  # a last line without its newline
                lines.append((self.line_start, bytes(self.cur) + b"\n"))
            # whole lines of the middle: neither entirely in the head nor entirely in the tail
            middle = [line for start, line in lines if start < tail_start and start + len(line) > len(self.head)]
            kept = ""
            if self.prefix:
                kept = "; %d line(s) starting with %r kept%s" % (len(middle), self.prefix.decode("utf-8", "replace"),
                                                                 ", later ones not (over %d bytes or %d lines)"
                                                                 % (self.keep_limit, KEEP_LINES)
                                                                 if self.kept_dropped else "")
            return "%s\n[gpuprobe: %d bytes omitted%s]\n%s%s" % (
                bytes(self.head).decode("utf-8", errors="replace"), omitted, kept,
                b"".join(middle).decode("utf-8", errors="replace"), tail.decode("utf-8", errors="replace"))
        return (bytes(self.head) + tail).decode("utf-8", errors="replace")

    @property
    def truncated(self):
        return self.total > 2 * self.limit


def _reader(pipe, capture):
    try:
        while True:
            data = pipe.read1(CHUNK)
            if not data:
                break
            capture.feed(data)
    except (OSError, ValueError):
        pass


def _writer(pipe, data):
    try:
        if data:
            pipe.write(data)
    except (OSError, ValueError):
        pass
    finally:
        try:
            pipe.close()
        except OSError:
            pass


def _kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        try:
            proc.kill()
        except OSError:
            pass


CANCEL_POLL_S = 0.05  # how often a cancellable wait looks at its event


def _wait(proc, timeout, cancel):
    """proc.wait(timeout), or, with ``cancel`` (a threading.Event another thread may set), until either: its return
    code, or None when cancelled. Raises subprocess.TimeoutExpired as proc.wait does."""
    if cancel is None:
        return proc.wait(timeout=timeout)
    deadline = time.monotonic() + timeout
    while not cancel.is_set():
        try:
            return proc.wait(timeout=max(0.0, min(CANCEL_POLL_S, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline:
                raise
    return None


def _execute(argv, timeout=DEFAULT_TIMEOUT, env=None, stdin_data=None, cwd=None, limit=MAX_CAPTURE, keep_prefix=None,
             keep_limit=KEEP_LIMIT, cancel=None):
    """Run ``argv`` without the allowlist check (only ``run`` calls this; tests call it for the capture)."""
    result = {"argv": argv, "rc": None, "stdout": "", "stderr": "", "duration_ms": 0.0,
              "timed_out": False, "error": None, "stdout_bytes": 0, "stderr_bytes": 0, "truncated": False}
    if timeout is None or timeout <= 0:
        raise ValueError("timeout must be > 0 seconds (got %r)" % (timeout,))
    t0 = time.monotonic()
    try:
        proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE if stdin_data is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd, start_new_session=True,
        )
    except FileNotFoundError:
        result["error"] = "not found: %s" % argv[0]
        return result
    except OSError as exc:
        result["error"] = "cannot execute %s: %s" % (argv[0], exc)
        return result
    out, err = _Capture(limit, keep_prefix, keep_limit), _Capture(limit)
    threads = [threading.Thread(target=_reader, args=(proc.stdout, out)),
               threading.Thread(target=_reader, args=(proc.stderr, err))]
    if stdin_data is not None:
        data = stdin_data.encode("utf-8") if isinstance(stdin_data, str) else stdin_data
        threads.append(threading.Thread(target=_writer, args=(proc.stdin, data)))
    for t in threads:
        t.daemon = True
        t.start()
    try:
        try:
            result["rc"] = _wait(proc, timeout, cancel)
            if result["rc"] is None:  # cancelled from another thread: the process group dies as on a timeout
                _kill_group(proc)
                result["error"] = "cancelled"
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    pass
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            result["timed_out"] = True
            result["error"] = "timeout after %gs" % timeout
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        for t in threads:
            # a grandchild in another session (a runtime's monitor) may hold the pipe open: do not wait forever
            t.join(timeout=5 if not result["timed_out"] else 2)
    except BaseException:
        # KeyboardInterrupt (SIGINT), SystemExit (a SIGTERM handler), anything: the child's group dies with us
        _kill_group(proc)
        raise
    finally:
        for pipe in (proc.stdout, proc.stderr):
            try:
                pipe.close()
            except (OSError, ValueError):
                pass
    result["stdout"], result["stderr"] = out.text(), err.text()
    result["stdout_bytes"], result["stderr_bytes"] = out.total, err.total
    result["truncated"] = out.truncated or err.truncated
    result["duration_ms"] = round((time.monotonic() - t0) * 1000.0, 1)
    return result


def capture_pieces(pieces, keep_prefix=None):
    """What ``run`` returns of a process's output for output read elsewhere (a CRI log file): ``pieces`` yields
    (stream name 'stdout' or 'stderr', bytes); the same bounds as ``run`` (head and tail of MAX_CAPTURE bytes each,
    ``keep_prefix`` lines of stdout kept from the middle). A dict stdout, stderr, stdout_bytes, stderr_bytes,
    truncated."""
    caps = {"stdout": _Capture(MAX_CAPTURE, keep_prefix), "stderr": _Capture(MAX_CAPTURE)}
    for stream, data in pieces:
        caps[stream].feed(data)
    return {"stdout": caps["stdout"].text(), "stderr": caps["stderr"].text(), "stdout_bytes": caps["stdout"].total,
            "stderr_bytes": caps["stderr"].total, "truncated": caps["stdout"].truncated or caps["stderr"].truncated}


def run(argv, timeout=DEFAULT_TIMEOUT, env=None, stdin_data=None, cwd=None, keep_prefix=None, cancel=None):
    """Run ``argv`` (a list, never a shell string; one of the allowed SHAPES) and return a dict:

    argv, rc (None when it did not run or was killed), stdout, stderr (head and tail, at most MAX_CAPTURE
    bytes each), stdout_bytes, stderr_bytes (total sizes), truncated, duration_ms, timed_out, error (None,
    or why it did not run / was killed). ``keep_prefix`` (bytes): stdout lines that start with it are kept
    whole also from the omitted middle (at most KEEP_LIMIT bytes of them): the probe's JSON lines.
    ``cancel``: a threading.Event; once another thread sets it, the process group is killed (error "cancelled"),
    for a process run in a thread, where no signal handler can interrupt it.
    Raises ForbiddenCommand for any other command and ValueError for a timeout <= 0.
    """
    argv = [str(a) for a in argv]
    check_allowed(argv)
    return _execute(argv, timeout=timeout, env=env, stdin_data=stdin_data, cwd=cwd, keep_prefix=keep_prefix, cancel=cancel)


def which(name, extra_dirs=()):
    """Path of ``name`` on PATH or in ``extra_dirs`` (searched first), or None."""
    for d in extra_dirs:
        candidate = os.path.join(d, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which(name)


def first_line(text):
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""
