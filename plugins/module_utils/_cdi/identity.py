# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: the CDI identity map of the cdi layer (which host GPU each CDI device gives). Not public API.

A CDI device name is only a label: what a container gets is decided by the device nodes of the device's merged
edits. ``identity_map`` derives, for every device of the requested kinds, the host GPU(s) those nodes give
(char major:minor -> minor -> the host GPU with that minor -> its NVML index and UUID; MIG instances through the
``/dev/nvidia-caps/nvidia-cap<N>`` nodes, whose minors the host record maps to GPU instance / compute instance),
and checks the name's claim against it, following the names nvidia-ctk writes (NVIDIA/nvidia-container-toolkit
pkg/nvcdi/namer.go, --device-name-strategy):

- ``index``: ``0`` (the NVML index); ``type-index``: ``gpu0`` / ``mig0:1``; ``uuid``: ``GPU-<uuid>`` /
  ``MIG-<uuid>``; MIG ``index``: ``<gpu index>:<mig index>``, the MIG index being the position of the MIG device
  in NVML's enumeration of that GPU's MIG devices; ``all``: every device.

An index name and a UUID name for the same GPU are aliases (nvidia-ctk writes both), never a conflict. A name that
follows none of these strategies is reported as such (NOT_RUN of its claim), never guessed at. Nothing here reads
the node: the inputs are the merged device nodes (with their host stat) and the host layer record.
"""

from __future__ import annotations

import re

from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS, WARN, make_check

NVIDIA_MAJOR = 195            # "nvidia-frontend" in /proc/devices
NON_GPU_MINORS = (254, 255)   # nvidia-modeset, nvidiactl
NAMINGS = ("index", "uuid", "mig-index", "mig-uuid", "type-index", "all", "other")

_UUID = r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}"
_INDEX = re.compile(r"^(\d+)$")
_GPU_UUID = re.compile(r"^GPU-%s$" % _UUID)
_MIG_INDEX = re.compile(r"^(\d+):(\d+)$")
_MIG_UUID = re.compile(r"^MIG-%s$" % _UUID)
_TYPE_GPU = re.compile(r"^gpu(\d+)$")
_TYPE_MIG = re.compile(r"^mig(\d+):(\d+)$")
_GPU_PATH = re.compile(r"^/dev/nvidia(\d+)$")
_CAPS_PATH = re.compile(r"^/dev/nvidia-caps/nvidia-cap(\d+)$")


def _check(title, fail, nxt):
    return {"title": title, "fail": fail, "next": nxt}


CHECKS = {
    "cdi.identity.host_gpus": _check(
        "the host GPUs the identity map is checked against: host.evidence.gpus, else evidence.nvml.gpus (index, UUID, "
        "minor), else the host's /dev/nvidiaN nodes (minors only: indices and UUIDs unknown)",
        "(NOT_RUN) no host record, or no NVML: names that claim an index or UUID cannot be checked",
        "run the host layer on the node first and give its record to the cdi layer; make NVML work (pynvml)"),
    "cdi.identity.gives_gpu": _check(
        "each device of a requested kind gives at least one GPU of this host through its device nodes "
        "(char 195:N, N not 254/255, N the minor of a host GPU)",
        "the device gives no GPU of this host: a container asking for it gets no GPU, or a node of a GPU the host "
        "does not have",
        "compare the device's deviceNodes (major:minor) with ls -l /dev/nvidia* and the host layer's GPUs; "
        "regenerate the spec on this node (nvidia-ctk cdi generate)"),
    "cdi.identity.index": _check(
        "a device named by an index (0, gpu0) gives exactly the GPU at that NVML index",
        "the name claims one GPU and the device nodes give another, or a GPU the host does not have: a workload "
        "asking for GPU N runs on another GPU",
        "regenerate the spec on this node; the NVML index and the /dev/nvidiaN minor are not always equal"),
    "cdi.identity.uuid": _check(
        "a device named by a GPU UUID gives exactly the GPU with that UUID",
        "the UUID in the name is not the GPU behind the device's node (spec from another node, or GPUs swapped)",
        "nvidia-smi -L on this node; regenerate the spec on this node"),
    "cdi.identity.mig": _check(
        "a MIG device name (0:1, mig0:1, MIG-<uuid>) resolves through the device's nvidia-caps nodes to that MIG "
        "instance (caps minors from /proc/driver/nvidia-caps/mig-minors)",
        "the device gives another MIG instance, the whole GPU, or no MIG instance: the container does not get the "
        "MIG device its name claims",
        "nvidia-smi -L; cat /proc/driver/nvidia-caps/mig-minors; regenerate the spec after every MIG reconfiguration"),
    "cdi.identity.all": _check(
        "the device named 'all' gives every GPU of the host",
        "a container asking for all GPUs gets only some of them",
        "regenerate the spec after GPUs were added or came back; compare with nvidia-smi -L"),
    "cdi.identity.naming": _check(
        "the device name follows one of nvidia-ctk's naming strategies (index, uuid, type-index, MIG index/UUID, all)",
        "(NOT_RUN) the name follows none of them: which GPU it should give is not inferred, only what it gives is "
        "reported",
        "name devices by index or UUID (nvidia-ctk cdi generate --device-name-strategy) so that names can be checked"),
    "cdi.identity.host_gpu_unclaimed": _check(
        "every GPU of the host is given by some device of the requested kinds",
        "(WARN) no CDI device gives this GPU: containers cannot ask for it through CDI",
        "regenerate the spec after GPUs were added or the MIG layout changed"),
}


def classify_name(device):
    """(naming, claim) of a device name (the part after '='), as nvidia-ctk's strategies write them.

    claim: {"index": n} | {"uuid": s} | {"gpu": g, "mig": j} | {"mig_uuid": s} | {} (all, other)."""
    name = device or ""
    if name == "all":
        return "all", {}
    m = _INDEX.match(name)
    if m:
        return "index", {"index": int(m.group(1))}
    if _GPU_UUID.match(name):
        return "uuid", {"uuid": name}
    m = _MIG_INDEX.match(name)
    if m:
        return "mig-index", {"gpu": int(m.group(1)), "mig": int(m.group(2))}
    if _MIG_UUID.match(name):
        return "mig-uuid", {"mig_uuid": name}
    m = _TYPE_GPU.match(name)
    if m:
        return "type-index", {"index": int(m.group(1))}
    m = _TYPE_MIG.match(name)
    if m:
        return "type-index", {"gpu": int(m.group(1)), "mig": int(m.group(2))}
    return "other", {}


def _int(value):
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _mig_rows(gpu):
    """The MIG instances of an I1 row ([{uuid, gi, ci, caps, position, index}]), or None when unknown."""
    mig = gpu.get("mig")
    if not isinstance(mig, dict) or not isinstance(mig.get("instances"), list):
        return None
    out = []
    for pos, inst in enumerate(mig["instances"]):
        if not isinstance(inst, dict):
            continue
        caps = inst.get("caps_minors") if isinstance(inst.get("caps_minors"), dict) else {}
        out.append({"uuid": inst.get("uuid"), "gi": _int(inst.get("gi")), "ci": _int(inst.get("ci")),
                    "caps": [_int(caps.get("gi")), _int(caps.get("ci"))], "position": pos, "index": _int(inst.get("index"))})
    return out


def host_gpus(host_record):
    """(rows, source, majors) of the host's GPUs.

    rows: [{index, uuid, minor, name, mig}] (mig: list of instances, or None when unknown), or None when there is
    no host record at all; source: where they came from; majors: (nvidia major, nvidia-caps major or None)."""
    if not isinstance(host_record, dict):
        return None, "no host record", (NVIDIA_MAJOR, None)
    ev = host_record.get("evidence") or {}
    majors = ev.get("char_majors") if isinstance(ev.get("char_majors"), dict) else {}
    nv_major = majors.get("nvidia-frontend", majors.get("nvidia", NVIDIA_MAJOR))
    caps_major = majors.get("nvidia-caps")
    rows = []
    gpus = ev.get("gpus")
    nvml = ev.get("nvml") if isinstance(ev.get("nvml"), dict) else {}
    if isinstance(gpus, list) and gpus:
        source = "host.evidence.gpus"
        for g in gpus:
            if isinstance(g, dict):
                rows.append({"index": _int(g.get("index")), "uuid": g.get("uuid"), "minor": _int(g.get("minor")),
                             "name": g.get("name"), "mig": _mig_rows(g)})
    elif nvml.get("ok") and nvml.get("gpus"):
        source = "host.evidence.nvml.gpus"
        for g in nvml["gpus"]:
            if isinstance(g, dict):
                rows.append({"index": _int(g.get("index")), "uuid": g.get("uuid"), "minor": _int(g.get("minor_number")),
                             "name": g.get("name"), "mig": None})
    else:
        source = "host.evidence.device_nodes (no NVML: minors only, indices and UUIDs unknown)"
        nodes = ev.get("device_nodes")
        if not isinstance(nodes, dict):
            # a host record without any GPU inventory (neither rows, NVML nor device nodes): unknown, not "none"
            return None, "no GPU inventory in the host record", (nv_major, caps_major)
        for path, node in sorted(nodes.items()):
            if _GPU_PATH.match(path) and isinstance(node, dict) and node.get("exists") and node.get("type") == "char" \
                    and node.get("major") == nv_major and node.get("minor") not in NON_GPU_MINORS:
                rows.append({"index": None, "uuid": None, "minor": node.get("minor"), "name": None, "mig": None})
        rows.sort(key=lambda r: r["minor"])
    return rows, source, (nv_major, caps_major)


def _node_kind(node, majors):
    """('gpu', minor) | ('caps', minor) | ('gpu?', why) for a node whose numbers are unknown | (None, None)."""
    nv_major, caps_major = majors
    path = node.get("hostPath") or node.get("path") or ""
    major, minor = _int(node.get("major")), _int(node.get("minor"))
    if node.get("type") in ("c", "u") and major is not None and minor is not None:
        if major == nv_major and minor not in NON_GPU_MINORS:
            return "gpu", minor
        if (caps_major is not None and major == caps_major) or (caps_major is None and _CAPS_PATH.match(path)):
            return "caps", minor
        return None, None
    if _GPU_PATH.match(path) or _GPU_PATH.match(node.get("path") or ""):
        host = node.get("host") or {}
        return "gpu?", "%s: no major:minor (host: %s)" % (path, host.get("error") or "not a device")
    return None, None


def _describe_nodes(nodes):
    return ", ".join("%s %s %s:%s" % (n.get("path"), n.get("type") or "?", n.get("major"), n.get("minor"))
                     for n in nodes) or "no device nodes"


def _entry(row, minor, mig_uuid=None, on_host=True):
    return {"uuid": row.get("uuid") if row else None, "index": row.get("index") if row else None, "minor": minor,
            "mig_uuid": mig_uuid, "_on_host": on_host, "_name": row.get("name") if row else None}


def _gives(nodes, rows, majors):
    """What the merged device nodes give: (entries, notes). Entries carry _on_host (a GPU of this host) and _name."""
    gpu_minors, caps, notes = [], set(), []
    for node in nodes or []:
        kind, value = _node_kind(node, majors)
        if kind == "gpu" and value not in gpu_minors:
            gpu_minors.append(value)
        elif kind == "caps":
            caps.add(value)
        elif kind == "gpu?":
            notes.append(value)
    by_minor = dict((r["minor"], r) for r in rows or [] if r["minor"] is not None)
    entries, matched_caps = [], set()
    for minor in sorted(gpu_minors):
        row = by_minor.get(minor)
        if rows is None:
            entries.append(_entry(None, minor, on_host=None))
            continue
        if row is None and any(r["minor"] is None for r in rows):
            entries.append(_entry(None, minor, on_host=None))
            notes.append("195:%d: the minor of some host GPU is unknown" % minor)
            continue
        if row is None:
            entries.append(_entry(None, minor, on_host=False))
            notes.append("195:%d is no GPU of this host" % minor)
            continue
        migs = []
        for inst in row["mig"] or []:
            need = [c for c in inst["caps"] if c is not None]
            if need and all(c in caps for c in need):
                migs.append(inst)
                matched_caps.update(need)
        if migs:
            entries.extend(_entry(row, minor, inst["uuid"]) for inst in migs)
        else:
            entries.append(_entry(row, minor))
    if caps - matched_caps:
        notes.append("nvidia-caps minor(s) %s matched to no MIG instance of a GPU the device gives"
                     % ", ".join(str(c) for c in sorted(caps - matched_caps)))
    return entries, notes


def _describe(entries):
    out = []
    for e in entries:
        text = "GPU %s (minor %s, %s)" % ("?" if e["index"] is None else e["index"], e["minor"], e["uuid"] or "UUID unknown")
        if e["mig_uuid"]:
            text += " MIG %s" % e["mig_uuid"]
        if e["_on_host"] is False:
            text = "minor %s (no GPU of this host)" % e["minor"]
        out.append(text)
    return ", ".join(out) or "no GPU"


def _observed(entries, notes):
    text = _describe(entries)
    return text + ("; " + "; ".join(notes) if notes else "")


def _gpu_key(e):
    return e["uuid"] if e["uuid"] else ("minor", e["minor"])


def _unanswerable(rows, given):
    """(status, observed) when a name's claim cannot hold or cannot be checked at all, else None."""
    if rows is None:
        return NOT_RUN, "host GPUs unknown (no host record)"
    if not any(e["_on_host"] for e in given):
        if any(e["_on_host"] is None for e in given):
            return NOT_RUN, "gives %s, whose host GPU is unknown" % _describe(given)
        return None, "gives no GPU of this host"
    return None


def _claim_index(claim, rows, given):
    """(status, or None for the device's FAIL/WARN, and the observed text) of an index claim."""
    on_host = [e for e in given if e["_on_host"]]
    early = _unanswerable(rows, given)
    if early:
        return early
    target = [r for r in rows if r["index"] == claim["index"]]
    if not target:
        if any(r["index"] is None for r in rows):
            return NOT_RUN, "GPU indices unknown (no NVML); gives %s" % _describe(on_host)
        return None, "this host has no GPU %d (indices %s); gives %s" % (
            claim["index"], ", ".join(str(r["index"]) for r in rows) or "none", _describe(on_host))
    minors = set(e["minor"] for e in given)
    if minors == set([target[0]["minor"]]):
        return PASS, _describe(on_host)
    return None, "gives %s" % _describe(given)


def _claim_uuid(claim, rows, given):
    on_host = [e for e in given if e["_on_host"]]
    early = _unanswerable(rows, given)
    if early:
        return early
    if not any(r["uuid"] for r in rows):
        return NOT_RUN, "GPU UUIDs unknown (no NVML); gives %s" % _describe(on_host)
    want = claim["uuid"].lower()
    if not any((r["uuid"] or "").lower() == want for r in rows):
        return None, "no GPU of this host has UUID %s; gives %s" % (claim["uuid"], _describe(given))
    if set((e["uuid"] or "").lower() for e in given) == set([want]) and all(e["_on_host"] for e in given):
        return PASS, _describe(on_host)
    return None, "gives %s" % _describe(given)


def _find_mig(claim, rows):
    """(instance, row, why) of a MIG claim; instance None with why when it cannot be found or is unknown."""
    if "mig_uuid" in claim:
        known = [r for r in rows if r["mig"] is not None]
        for r in known:
            for inst in r["mig"]:
                if (inst["uuid"] or "").lower() == claim["mig_uuid"].lower():
                    return inst, r, None
        if not known:
            return None, None, (NOT_RUN, "the host record lists no MIG instances (host.evidence.gpus[].mig)")
        if any(inst["uuid"] is None for r in known for inst in r["mig"]):
            # procfs lists MIG instances without their UUIDs: the claim can be neither confirmed nor refuted
            return None, None, (NOT_RUN, "MIG instance UUIDs unknown (no NVML): cannot tell whether %s is one of them"
                                % claim["mig_uuid"])
        return None, None, (None, "no MIG instance of this host has UUID %s" % claim["mig_uuid"])
    parent = [r for r in rows if r["index"] == claim["gpu"]]
    if not parent:
        if any(r["index"] is None for r in rows):
            return None, None, (NOT_RUN, "GPU indices unknown (no NVML)")
        return None, None, (None, "this host has no GPU %d" % claim["gpu"])
    row = parent[0]
    if row["mig"] is None:
        return None, row, (NOT_RUN, "MIG instances of GPU %d unknown (host.evidence.gpus[].mig)" % claim["gpu"])
    by_index = [i for i in row["mig"] if i["index"] == claim["mig"]]
    if by_index:
        return by_index[0], row, None
    if claim["mig"] < len(row["mig"]) and all(i["index"] is None for i in row["mig"]):
        return row["mig"][claim["mig"]], row, None
    return None, row, (None, "GPU %d has no MIG device %d (it has %d)" % (claim["gpu"], claim["mig"], len(row["mig"])))


def _claim_mig(claim, rows, given):
    if rows is None:
        return NOT_RUN, "host GPUs unknown (no host record)"
    inst, _row, why = _find_mig(claim, rows)
    if inst is None:
        status, text = why
        return status, "%s; gives %s" % (text, _describe(given))
    if all(c is None for c in inst["caps"]):
        return NOT_RUN, "nvidia-caps minors of %s unknown (/proc/driver/nvidia-caps/mig-minors not read); gives %s" % (
            inst["uuid"], _describe(given))
    migs = set(e["mig_uuid"] for e in given)
    if migs == set([inst["uuid"]]):
        return PASS, _describe(given)
    return None, "expected %s (gi %s ci %s, caps minors %s); gives %s" % (
        inst["uuid"], inst["gi"], inst["ci"], "/".join(str(c) for c in inst["caps"]), _describe(given))


def _expected_text(naming, claim):
    if "mig_uuid" in claim:
        return "MIG instance %s" % claim["mig_uuid"]
    if "mig" in claim:
        return "MIG device %d of GPU %d" % (claim["mig"], claim["gpu"])
    if "uuid" in claim:
        return "the GPU with UUID %s" % claim["uuid"]
    if "index" in claim:
        return "exactly the GPU at index %d" % claim["index"]
    return naming


def _gpu_subject(row):
    return "GPU %s (%s, minor %s)" % ("?" if row["index"] is None else row["index"], row["uuid"] or "UUID unknown", row["minor"])


def identity_map(devices, requested, host_record, kinds):
    """The identity map of the cdi layer and its checks.

    devices: [{"name": "<kind>=<device>", "deviceNodes": [merged nodes as _cdi.merge_edits produces them]}] for
    every device of the requested kinds; requested: the resolved requested qualified names; host_record: the host
    layer record (or None); kinds: the kinds whose devices are GPU devices (each must give a GPU).

    Returns (checks, identity): checks, a list of check dicts (id, status, subject, expected, observed, hint) whose
    ids are in CHECKS, to add to the cdi layer; identity, the I2 record {"devices": [{name, device, naming, gives}],
    "expected_gpus": [{uuid, index, minor, name, mig_uuid}]}.
    """
    checks = []

    def add(check_id, status, subject, expected=None, observed=None):
        hint = CHECKS[check_id]["next"] if status in (FAIL, WARN) else None
        checks.append(make_check(check_id, status, subject, expected, observed, hint))

    requested = set(requested or [])
    kinds = set(kinds or [])
    rows, source, majors = host_gpus(host_record)
    if rows is None:
        add("cdi.identity.host_gpus", NOT_RUN, "host", "the host layer's GPU inventory", "%s: host GPUs unknown" % source)
    elif not rows:
        add("cdi.identity.host_gpus", NOT_RUN, "host", "the host layer's GPU inventory", "no GPU in %s" % source)
    elif not any(r["uuid"] for r in rows):
        add("cdi.identity.host_gpus", NOT_RUN, "host", "GPU indices and UUIDs",
            "%d GPU node(s) by minor (%s): UUIDs unknown" % (len(rows), source))
    else:
        add("cdi.identity.host_gpus", PASS, "host", "GPU indices and UUIDs",
            "%d GPU(s) from %s" % (len(rows), source))

    out_devices, expected, seen, given_keys = [], [], set(), set()
    for dev in devices or []:
        qualified = str(dev.get("name"))
        kind, _sep, name = qualified.partition("=")
        naming, claim = classify_name(name)
        given, notes = _gives(dev.get("deviceNodes"), rows, majors)
        out_devices.append({"name": qualified, "device": name, "naming": naming,
                            "gives": [dict((k, e[k]) for k in ("uuid", "index", "minor", "mig_uuid")) for e in given]})
        wanted = qualified in requested
        # a name that lies FAILs whether or not this run asked for it: the node's spec offers it to every workload
        # (a scheduler asking for GPU 1 gets GPU 0), so the node's CDI configuration is wrong either way
        bad = FAIL
        is_gpu_kind = kind in kinds
        on_host = [e for e in given if e["_on_host"]]
        if is_gpu_kind:
            given_keys.update(e["minor"] for e in on_host)
            if rows is None:
                add("cdi.identity.gives_gpu", NOT_RUN, qualified, "a GPU of this host",
                    "%s (host GPUs unknown: no host record)" % _observed(given, notes))
            elif on_host:
                add("cdi.identity.gives_gpu", PASS, qualified, "a GPU of this host", _observed(given, notes))
            elif any(e["_on_host"] is None for e in given):
                add("cdi.identity.gives_gpu", NOT_RUN, qualified, "a GPU of this host", _observed(given, notes))
            else:
                add("cdi.identity.gives_gpu", bad, qualified, "a GPU of this host",
                    "%s; device nodes: %s" % (_observed(given, notes), _describe_nodes(dev.get("deviceNodes"))))
        if naming == "all":
            if rows is None:
                add("cdi.identity.all", NOT_RUN, qualified, "every GPU of this host", "host GPUs unknown (no host record)")
            else:
                missing = [r for r in rows if r["minor"] not in set(e["minor"] for e in on_host)]
                unsure = missing and all(r["minor"] is None for r in missing)
                add("cdi.identity.all", NOT_RUN if unsure else (bad if missing else PASS), qualified,
                    "every GPU of this host (%d)" % len(rows),
                    ("misses %s; gives %s" % (", ".join(_gpu_subject(r) for r in missing), _describe(given)))
                    if missing else _describe(given))
        elif naming == "other":
            add("cdi.identity.naming", NOT_RUN, qualified, "a name of nvidia-ctk's strategies",
                "name %r follows none of nvidia-ctk's naming strategies: which GPU it should give is not inferred; "
                "it gives %s" % (name, _observed(given, notes)))
        else:
            if "mig" in claim or "mig_uuid" in claim:
                check_id, (status, text) = "cdi.identity.mig", _claim_mig(claim, rows, given)
            elif "uuid" in claim:
                check_id, (status, text) = "cdi.identity.uuid", _claim_uuid(claim, rows, given)
            else:
                check_id, (status, text) = "cdi.identity.index", _claim_index(claim, rows, given)
            if notes and status != PASS:
                text += "; " + "; ".join(notes)
            add(check_id, bad if status is None else status, qualified, _expected_text(naming, claim),
                "%s (%s name)" % (text, naming))
        if wanted:
            for e in given:
                if e["_on_host"] is False:
                    continue
                key = (_gpu_key(e), e["mig_uuid"])
                if key not in seen:
                    seen.add(key)
                    expected.append({"uuid": e["uuid"], "index": e["index"], "minor": e["minor"], "name": e["_name"],
                                     "mig_uuid": e["mig_uuid"]})
    for row in rows or []:
        if row["minor"] is not None and row["minor"] not in given_keys:
            add("cdi.identity.host_gpu_unclaimed", WARN, _gpu_subject(row), "given by a device of %s" % ", ".join(sorted(kinds)),
                "no device of the requested kinds gives it")
    return checks, {"devices": out_devices, "expected_gpus": expected}
