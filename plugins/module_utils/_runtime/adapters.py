# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (runtime layer): the adapters through which the probe container is started, listed and removed in a
runtime (``adapter(info)``: one object with run_probe, remove, list_ours), and the CLI one (podman, docker); the CRI
one (containerd, CRI-O) is in cri.py and registers itself here. Which runtime is used is _runtime.select's."""

from __future__ import annotations

import json
import time
import uuid as uuidlib

from ansible_collections.gpuprobe.layers.plugins.module_utils._common import owner as _owner
from ansible_collections.gpuprobe.layers.plugins.module_utils._probe import contract as _probe_contract
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.options import check_device, check_image
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.run import run
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.catalogue import (
    CREATED_LABEL, LABEL, OWNER_LABEL, error_line, probe_in_container,
)
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.vocab import RUN_ID_RE
# the CLI engines' detection lives with the selection (_runtime.select), which the inspect stage runs without loading
# this module or the CRI adapter and grpc (~0.4 s on a node, docs/performance.md)
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.select import _env


def detect_runtime(requested="auto", timeout=30, endpoint=None, descriptor=None):
    """The one engine to use: dict name, path (CLI engines) or endpoint (CRI engines), version, oci_runtime, cgroups,
    usable (bool), reason, selected_because. ``auto`` is ``_runtime_select``'s choice (the kubelet's CRI runtime, else
    a running docker daemon, else podman); a CRI engine is reached at ``endpoint`` (else its default socket) with the
    CRI API ``descriptor``; docker named with an ``endpoint`` is the daemon at that socket."""
    from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.select import select_runtimes  # pylint: disable=import-outside-toplevel
    return select_runtimes(requested or "auto", timeout=timeout, endpoint=endpoint, descriptor=descriptor)[0]


def container_name(run_id):
    return "gpuprobe-%s-%s" % (run_id, uuidlib.uuid4().hex[:8])


def build_argv(engine, name, run_id, image, cdi_devices, probe_path, config, user=None, pull="never", owner=None,
               created=None, in_container=None):
    """The probe container's argv; the script is mounted at ``in_container`` (a fresh probe_in_container() when None).
    Raises ValueError for a device that is not a qualified CDI name or an image that is not an image reference: they
    are checked here, where the argv is built, whoever the caller is."""
    in_container = in_container or probe_in_container()
    devices = [check_device(d) for d in cdi_devices]
    check_image(image)
    argv = [engine["path"], "run", "--rm", "--name", name, "--label", "%s=%s" % (LABEL, run_id),
            "--label", "%s=%s" % (OWNER_LABEL, _owner.format_owner(owner)),
            "--label", "%s=%d" % (CREATED_LABEL, int(time.time() if created is None else created)),
            "--network=none", "--pull=%s" % pull]
    for device in devices:
        argv += ["--device", device]
    argv += ["-v", "%s:%s:ro" % (probe_path, in_container)]
    if user:
        argv += ["--user", str(user)]
    # isolated interpreter (-I -S): no PYTHON* variable, site, sitecustomize, .pth file or script-dir module of the
    # image or the spec's env can change what runs
    argv += ["--entrypoint", "python3", image] + list(_probe_contract.ISOLATED_FLAGS) + [in_container, json.dumps(config, sort_keys=True)]
    return argv


def remove_container(engine, name, timeout=30):
    # -t 0: kill at once; the probe is PID 1 in the container and ignores SIGTERM, so the default 10 s grace
    # period would only delay the removal of a hung probe
    argv = [engine["path"], "rm", "-f", "-t", "0", "-i", name] if engine["name"] == "podman" else [engine["path"], "rm", "-f", name]
    r = run(argv, timeout=timeout, env=_env(engine))
    # docker rm -f of a container that is gone (--rm removed it) exits 0 and still says "No such container": no error
    return {"rc": r["rc"], "removed": bool((r["stdout"] or "").strip()),
            "error": r["error"] or (error_line(r["stderr"]) or None if r["rc"] != 0 else None)}


def _parse_labels(value):
    if isinstance(value, dict):
        return dict((str(k), str(v)) for k, v in value.items())
    out = {}
    for part in str(value or "").split(","):  # docker ps: "k=v,k=v"
        key, sep, val = part.partition("=")
        if sep:
            out[key.strip()] = val
    return out


def _parse_ps(text):
    """podman ps --format json (one array) or docker ps --format '{{json .}}' (one object a line) -> rows."""
    text = (text or "").strip()
    if not text:
        return []
    try:
        doc = json.loads(text)
        rows = doc if isinstance(doc, list) else [doc]
    except ValueError:
        rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    out = []
    for row in rows:
        names = row.get("Names")
        name = names[0] if isinstance(names, list) and names else str(names or "")
        labels = _parse_labels(row.get("Labels"))
        created = labels.get(CREATED_LABEL)
        created = int(created) if str(created or "").isdigit() else (row.get("Created") if isinstance(row.get("Created"), int) else None)
        out.append({"name": name, "run_id": labels.get(LABEL), "owner": _owner.parse_owner(labels.get(OWNER_LABEL)),
                    "created": created, "state": row.get("State")})
    return out


def probe_containers(engine, run_id=None, timeout=30):
    """The containers labelled gpuprobe.run (=run_id when given), running or not: list of dicts name, run_id
    (the label's exact value), owner, created, state."""
    label = "label=%s=%s" % (LABEL, run_id) if run_id else "label=%s" % LABEL
    fmt = "json" if engine["name"] == "podman" else "{{json .}}"
    r = run([engine["path"], "ps", "-a", "--filter", label, "--format", fmt], timeout=timeout, env=_env(engine))
    if r["rc"] != 0:
        raise RuntimeError("%s ps failed: %s" % (engine["name"], error_line(r["stderr"]) or r["error"]))
    try:
        rows = _parse_ps(r["stdout"])
    except (ValueError, AttributeError) as exc:
        raise RuntimeError("%s ps: output not understood: %s" % (engine["name"], exc))
    # the runtime's filter is by label; ownership is decided on the exact parsed value, never a substring
    ours = [c for c in rows if c["run_id"] and RUN_ID_RE.match(c["run_id"]) and c["name"].startswith("gpuprobe-")]
    return [c for c in ours if run_id is None or c["run_id"] == run_id]


class CliAdapter(object):
    """The runtime interface, for an engine driven through its CLI (podman, docker). Every adapter has:

    - ``info``: the detection dict (name, path or endpoint, version, oci_runtime, cgroups, cdi, usable, reason);
    - ``run_probe(request)``: start the probe container with the request's CDI devices, wait for it to end,
      return ``_common.run.run``'s result dict (rc, stdout, stderr, duration_ms, timed_out, error, stdout_bytes,
      stderr_bytes, truncated) plus ``request``: what was asked of the engine, for the record (argv here);
    - ``remove(name, timeout)``: remove that container (dict rc, removed, error), also after an interrupt;
    - ``list_ours(run_id, timeout)``: our containers (probe_containers' rows), RuntimeError when not listable.

    ``request`` (dict): name, run_id, image, devices, probe_path (host file mounted read-only at ``in_container``,
    the run's own probe_in_container()), config (the probe's argument), user, pull, owner, timeout.
    """

    def __init__(self, info):
        self.info = info
        self.name = info["name"]

    def run_probe(self, request):
        argv = build_argv(self.info, request["name"], request["run_id"], request["image"], request["devices"],
                          request["probe_path"], request["config"], user=request.get("user"),
                          pull=request.get("pull") or "never", owner=request.get("owner"),
                          in_container=request.get("in_container"))
        result = run(argv, timeout=request["timeout"], keep_prefix=_probe_contract.LINE_PREFIX, env=_env(self.info))
        result["request"] = {"argv": argv}
        return result

    def remove(self, name, timeout=30):
        return remove_container(self.info, name, timeout)

    def list_ours(self, run_id=None, timeout=30):
        return probe_containers(self.info, run_id, timeout)


# engine name -> adapter class; an adapter module registers itself here (see ``register``)
ADAPTERS = {"podman": CliAdapter, "docker": CliAdapter}


def register(name, cls):
    ADAPTERS[name] = cls


def adapter(info):
    """The adapter object for a detected, usable engine (``detect_runtime``'s dict)."""
    try:
        return ADAPTERS[info["name"]](info)
    except KeyError:
        raise ValueError("no adapter for runtime %r" % (info.get("name"),))
