# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (gpuprobe.layers cdi layer): the registry, device selection and merged edits (pkg/cdi/cache.go, container-edits.go)."""

from __future__ import annotations

import json
import posixpath

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.catalogue import NO_PERMISSIONS
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.fs import under_root
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.host import host_device_info
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.names import parse_qualified_name
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.readings import by_name


# ---------------------------------------------------------------------------------------------------
# Resolution (cache.go)


def build_registry(files):
    """Devices from loaded files (each with 'priority'), scanned in priority order like Cache.refresh.

    Returns (devices {qualified: file record}, conflicts [{device, files}], overrides [{device, winner, overridden}]).
    """
    devices = {}
    conflicts = {}
    overrides = []
    for rec in sorted((r for r in files if r["ok"]), key=lambda r: r["priority"]):
        spec = rec["spec"]
        for dev in spec["devices"]:
            qualified = "%s=%s" % (spec["kind"], dev["name"])
            other = devices.get(qualified)
            if other is not None:
                if rec["priority"] > other["priority"]:
                    overrides.append({"device": qualified, "winner": rec["path"], "overridden": other["path"]})
                elif rec["priority"] == other["priority"]:
                    message = "conflicting device %r (specs %r, %r)" % (qualified, rec["path"], other["path"])
                    for r in (rec, other):
                        r.setdefault("conflicts", []).append(message)
                    entry = conflicts.setdefault(qualified, {"device": qualified, "files": []})
                    for p in (other["path"], rec["path"]):
                        if p not in entry["files"]:
                            entry["files"].append(p)
                    continue
                else:
                    continue
            devices[qualified] = rec
    for name in conflicts:
        devices.pop(name, None)
    return devices, list(conflicts.values()), overrides


def select_devices(registry, requested, kinds):
    """(resolved qualified names, unresolved [{device, reason}], expansions [{request, devices}])."""
    resolved, unresolved, expansions = [], [], []
    if requested:
        for req in requested:
            try:
                vendor, klass, name = parse_qualified_name(req)
            except ValueError as exc:
                unresolved.append({"device": req, "reason": str(exc)})
                continue
            kind = "%s/%s" % (vendor, klass)
            if req in registry:
                resolved.append(req)
            elif name == "all":
                members = sorted(q for q in registry if q.split("=", 1)[0] == kind)
                if members:
                    expansions.append({"request": req, "devices": members})
                    resolved.extend(members)
                else:
                    unresolved.append({"device": req, "reason": "no device of kind %s" % kind})
            else:
                unresolved.append({"device": req, "reason": "unresolvable CDI device"})
    else:
        for kind in kinds:
            resolved.extend(sorted(q for q in registry if q.split("=", 1)[0] == kind))
    out = list(dict.fromkeys(resolved))  # first occurrence kept, in order
    return out, unresolved, expansions


def _mount_depth(container_path):
    return posixpath.normpath(container_path or "/").count("/")


def _device_index(rec):
    index = rec.get("_device_index")
    if index is None:
        index = rec["_device_index"] = dict((d["name"], d) for d in rec["spec"]["devices"])
    return index


def device_of(registry, qualified):
    """The device entry (name, annotations, containerEdits) a resolved qualified name stands for."""
    return _device_index(registry[qualified])[qualified.split("=", 1)[1]]


def merge_edits(registry, qualified_names, root="/"):
    """The merged container edits for the requested devices, in the order the reference library applies
    them (cache.go InjectDevices + ContainerEdits.Apply); device node type/major:minor are filled from the
    host node (under ``root``) when the spec omits them. Linear in the number of devices and edits.

    Returns (edits, sources) where sources maps qualified name -> spec file path. ``edits["injected_nodes"]``
    lists every device node Apply visits, in order, including those a later node with the same path
    replaces: Apply runs fillMissingInfo (a stat of the host node) on each before RemoveDevice/AddDevice."""
    env, env_keys = [], {}
    nodes, mounts, hooks, gids, gid_seen, injected = {}, {}, [], [], set(), []
    seen_specs, sources = set(), {}
    stat_cache = {}
    blocks = []
    for q in qualified_names:
        rec = registry[q]
        sources[q] = rec["path"]
        if rec["path"] not in seen_specs:
            seen_specs.add(rec["path"])
            blocks.append(rec["spec"].get("containerEdits") or {})
        blocks.append(device_of(registry, q).get("containerEdits") or {})
    for edits in blocks:
        for entry in edits.get("env") or []:
            key = entry.split("=", 1)[0]
            if key in env_keys:
                env[env_keys[key]] = entry
            else:
                env_keys[key] = len(env)
                env.append(entry)
        for node in edits.get("deviceNodes") or []:
            filled = _fill_node(node, root, stat_cache)
            injected.append(filled)
            path = node.get("path")
            if path in nodes:
                nodes[path]["replaced"] = True
                del nodes[path]  # specgen.RemoveDevice, then AddDevice appends at the end
            nodes[path] = filled
        for m in edits.get("mounts") or []:
            cpath = m.get("containerPath")
            mounts.pop(cpath, None)  # specgen.RemoveMount, then AddMount appends
            mounts[cpath] = {"hostPath": m.get("hostPath"), "containerPath": cpath, "type": m.get("type", ""),
                             "options": list(m.get("options") or [])}
        for h in edits.get("hooks") or []:
            hooks.append({"hookName": h.get("hookName"), "path": h.get("path"), "args": list(h.get("args") or []),
                          "env": list(h.get("env") or []), "timeout": h.get("timeout")})
        for gid in edits.get("additionalGids") or []:
            if gid and gid not in gid_seen:
                gid_seen.add(gid)
                gids.append(gid)
    reading = by_name(registry[qualified_names[0]].get("reading")) if qualified_names else None
    if reading is not None and reading["mount_order"] == "depth+path":
        # v0.5.2-v0.8.1: sort.Sort(orderedMounts) with Less by depth, then by destination
        mounts = sorted(mounts.values(), key=lambda m: (_mount_depth(m["containerPath"]), (m["containerPath"] or "").encode("utf-8", "surrogatepass")))
    else:
        mounts = sorted(mounts.values(), key=lambda m: _mount_depth(m["containerPath"]))  # stable, like sort.Stable(orderedMounts)
    rules = cgroup_rules(injected)
    by_number = {}
    for r in rules:
        by_number.setdefault((r["type"], r["major"], r["minor"]), set()).update(r["access"])
    for node in nodes.values():
        node["permissions"] = effective_access(node, by_number)
    return {"env": env, "deviceNodes": list(nodes.values()), "mounts": mounts, "hooks": hooks, "additionalGids": gids,
            "injected_nodes": injected, "cgroup_rules": rules}, sources


def cgroup_rules(injected):
    """The device cgroup rules Apply leaves in the OCI spec: one ``AddLinuxResourcesDevice(true, type, major, minor,
    access)`` per visited node of type b or c (container-edits.go), in order. ``RemoveDevice`` of a node replaced later
    at the same path removes the node, not its rule: a node given twice (spec-level and device-level) leaves both."""
    out = []
    for n in injected:
        if n["type"] in ("b", "c") and n["major"] is not None:
            out.append({"type": n["type"], "major": n["major"], "minor": n["minor"], "access": n["permissions"],
                        "path": n["path"]})
    return out


def effective_access(node, by_number):
    """The access the device cgroup gives the node: the union of every allow rule for its type and major:minor
    (``by_number``: (type, major, minor) -> set of access letters); a ``u`` node is a char device to the kernel but
    gets no rule of its own: only another node's ``c`` rule opens it. A fifo is not under the device cgroup: its own
    permissions are kept."""
    if node["type"] == "p":
        return node["permissions"]
    have = by_number.get(("b" if node["type"] == "b" else "c", node["major"], node["minor"]), ())
    return "".join(c for c in "rwm" if c in have)


def _fill_node(node, root, stat_cache=None):
    """The node as Apply adds it, with its host stat and what fillMissingInfo says (``inject_error``)."""
    path = node.get("path")
    host_path = node.get("hostPath") or path
    declared = {"type": node.get("type", ""), "major": node.get("major"), "minor": node.get("minor")}
    out = {"path": path, "hostPath": host_path, "type": declared["type"], "major": node.get("major") or 0,
           "minor": node.get("minor") or 0, "permissions": None, "fileMode": node.get("fileMode"),
           "uid": node.get("uid"), "gid": node.get("gid"), "declared": declared, "host": None, "replaced": False}
    full = under_root(root, host_path)
    if stat_cache is None or full not in stat_cache:
        info = host_device_info(full)
        if stat_cache is not None:
            stat_cache[full] = info
    htype, hmajor, hminor, err = info if stat_cache is None else stat_cache[full]
    out["host"] = {"type": htype, "major": hmajor, "minor": hminor, "error": err}
    out["inject_error"] = _inject_error(out, node, htype, err)
    needs_fill = not (out["type"] and (out["major"] != 0 or out["type"] == "p"))
    if needs_fill and htype is not None:
        if not out["type"]:
            out["type"] = htype
        if out["type"] != "p" and out["major"] == 0:
            out["major"], out["minor"] = hmajor, hminor
    elif needs_fill:
        out["major"] = out["minor"] = None
    perms = node.get("permissions", "")
    out["permissions"] = "rwm" if perms == "" else ("" if perms == NO_PERMISSIONS else perms)
    return out


def _go_quote(text):
    return json.dumps(text or "")


def _inject_error(out, node, htype, err):
    """What container-edits_unix.go fillMissingInfo returns for this node (None: no error). A node is
    'minimally specified' when it has a type and a major (or is a fifo); then a failed stat is no error
    and the host type is not compared. Otherwise the host node must stat (deviceInfoFromPath: lstat, a
    char, block or fifo node) and a declared type must equal the host's (``u`` never does)."""
    declared_type = node.get("type", "")
    minimal = bool(declared_type) and ((node.get("major") or 0) != 0 or declared_type == "p")
    if htype is None:
        if minimal:
            return None
        why = "not a device node" if (err or "").startswith("not a device") else (err or "")[:1].lower() + (err or "")[1:]
        return "failed to stat CDI host device %s: %s" % (_go_quote(out["hostPath"]), why)
    if not minimal and declared_type and declared_type != htype:
        return "CDI device (%s, %s), host type mismatch (%s, %s)" % (_go_quote(out["path"]), _go_quote(out["hostPath"]), declared_type, htype)
    return None
