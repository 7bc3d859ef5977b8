# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (runtime layer): the cgroup parent of the probe's sandbox, placed as the kubelet places a BestEffort Pod.
Not public API.

The kubelet's RunPodSandbox always sets ``linux.cgroup_parent``: the Pod's own cgroup, ``pod<uid>`` under its QoS
cgroup (kubernetes pkg/kubelet/cm/pod_container_manager_linux.go ``GetPodContainerName``: the QoS cgroup name plus
``GetPodCgroupNameSuffix`` = ``"pod" + uid``; pkg/kubelet/kuberuntime/kuberuntime_sandbox.go takes its
``GetPodCgroupParent``). The QoS cgroups are ``<cgroupRoot>/kubepods`` (Guaranteed Pods directly in it),
``kubepods/burstable`` and ``kubepods/besteffort`` (pkg/kubelet/cm/qos_container_manager_linux.go; ``kubepods`` is
``defaultNodeAllocatableCgroupName``, added under ``cgroupRoot`` by pkg/kubelet/cm/container_manager_linux.go). The
kubelet's cgroup driver writes a name either way (pkg/kubelet/cm/cgroup_manager_linux.go): ``cgroupfs`` as the path
``/kubepods/besteffort/pod<uid>`` (``ToCgroupfs``), ``systemd`` as the slice path
``/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod<uid>.slice`` (``ToSystemd``: each part's '-'
escaped to '_', joined with '-', expanded by runc's ``ExpandSlice``); containerd takes a parent whose last part ends in
``.slice`` as a systemd slice (pkg/cri ``getCgroupsPath``: ``<slice>:cri-containerd:<id>``, SystemdCgroup = true),
any other as a path. With ``cgroupsPerQOS: false`` the kubelet sends no parent at all
(``podContainerManagerNoop.GetPodContainerName`` returns ``""``): the runtime's default, as the probe then does too.

The probe's parent is the BestEffort QoS cgroup itself (the probe asks for no resources: a BestEffort Pod's QoS
class, whose cpu shares and QoS memory reservation the kubelet sets on that cgroup): the runtime makes the sandbox's
and the container's own cgroups in it, named by their ids (cgroupfs: ``<parent>/<64 hex id>``; systemd:
``cri-containerd-<id>.scope`` in the slice, CRI-O ``crio-<id>.scope``). Nothing of the kubelet's is made or changed,
and nothing there is taken by the kubelet for a Pod of its own:

- the kubelet's orphan sweep (pkg/kubelet/kubelet_pods.go ``cleanupOrphanedPodCgroups``) kills the processes of and
  removes the cgroups that ``GetAllPodsFromCgroups`` finds in the QoS cgroups and that belong to no Pod it knows: a
  child whose last name part (a systemd name decoded by ``ParseSystemdToCgroupName``: split at '-', '_' back to '-')
  contains ``"pod"`` (``podCgroupNamePrefix``) and splits on it in two. The runtime's names for the probe's cgroups
  are hexadecimal ids (no 'p', no 'o') after ``cri-containerd``/``crio``, so they never contain ``pod``
  (``is_pod_name`` is the kubelet's test; the probe records it for the names its sandbox got);
- the kubelet makes and updates only its QoS cgroups and the Pods' own (``pod<uid>``), and removes no other child;
- the runtime removes the sandbox's and the container's cgroups with them; where it left one (a shim killed), the
  probe's cleanup removes it (``remove``): a cgroupfs directory with ``rmdir``, which the kernel refuses while a
  process is in it, and only the directories named by the ids of the probe's own sandbox and container; a systemd
  scope with no process left is collected by systemd itself (the collection runs no service manager).

What still differs from a real Pod's placement: no Pod-level cgroup (``pod<uid>``, where the kubelet applies a
Pod's limits and ``podPidsLimit``) between the QoS cgroup and the sandbox.

Where the driver the kubelet uses cannot be known (a configuration file not read here; a cgroup driver that is
neither cgroupfs nor systemd; the runtime reports a different driver through the CRI ``RuntimeConfig`` call, which
a kubelet with the KubeletCgroupDriverFromCRI feature takes over its own setting) or the QoS cgroup is not on this
node (no kubelet made it: one is never made in the kubelet's place), no parent is given and the reason is said.
"""

from __future__ import annotations

import os
import re

QOS = "besteffort"
NODE_ALLOCATABLE = "kubepods"             # pkg/kubelet/cm defaultNodeAllocatableCgroupName
POD_PREFIX = "pod"                        # pkg/kubelet/cm podCgroupNamePrefix
DRIVERS = ("cgroupfs", "systemd")
MOUNTINFO = "/proc/self/mountinfo"
ID_RE = re.compile(r"^[0-9a-f]{64}$")     # a CRI sandbox or container id (containerd, CRI-O)
# the runtimes' own cgroup names of a sandbox or container under a systemd slice parent (the scope of the id)
SCOPE_PREFIXES = ("cri-containerd-", "crio-", "crio-conmon-")


def parse_cgroupfs(name):
    """The components of a cgroupfs name (pkg/kubelet/cm ``ParseCgroupfsToCgroupName``): '/' -> [], '/a/b' -> [a, b]."""
    parts = str(name or "").strip("/").split("/")
    return [] if parts == [""] else parts


def expand_slice(slice_name):
    """runc's ``ExpandSlice``: 'a-b-c.slice' -> '/a.slice/a-b.slice/a-b-c.slice'; ValueError for a name it refuses."""
    if not slice_name.endswith(".slice") or "/" in slice_name:
        raise ValueError("invalid slice name: %s" % slice_name)
    name = slice_name[:-len(".slice")]
    if name == "-":
        return "/"
    path, prefix = "", ""
    for component in name.split("-"):
        if component == "":
            raise ValueError("invalid slice name: %s" % slice_name)
        path += "/" + prefix + component + ".slice"
        prefix += component + "-"
    return path


def to_systemd(components):
    """pkg/kubelet/cm ``CgroupName.ToSystemd``: each part's '-' escaped to '_', joined with '-', expanded."""
    if not components:
        return "/"
    return expand_slice("-".join(c.replace("-", "_") for c in components) + ".slice")


def to_cgroupfs(components):
    return "/" + "/".join(components)


def is_pod_name(child, driver):
    """Whether the kubelet's ``GetAllPodsFromCgroups`` takes the QoS cgroup's child ``child`` for a Pod: its last name
    part (systemd: the base name without '.slice', split at '-', '_' read back as '-') contains 'pod' and splits on it
    in exactly two."""
    base = child
    if driver == "systemd":
        base = child[:-len(".slice")] if child.endswith(".slice") else child
        base = base.split("-")[-1].replace("_", "-")
    return POD_PREFIX in base and len(base.split(POD_PREFIX)) == 2


def child_names(driver, ident):
    """The names a runtime gives the cgroup of sandbox or container ``ident`` under a parent of ``driver``."""
    if driver == "systemd":
        return ["%s%s.scope" % (p, ident) for p in SCOPE_PREFIXES]
    return [ident]


def cgroup_mounts(mountinfo=MOUNTINFO):
    """The mount points of the cgroup filesystems this process sees (v1 controllers and v2), from mountinfo."""
    out = []
    try:
        with open(mountinfo) as fh:
            for line in fh:
                if " - " not in line:
                    continue
                fstype = line.split(" - ", 1)[1].split()[0]
                if fstype in ("cgroup", "cgroup2"):
                    out.append(line.split()[4].replace("\\040", " "))
    except OSError:
        pass
    return out


def no_parent(unknown=None, because=None, **extra):
    """No parent is given: ``unknown`` (why, where the kubelet would give one) or ``because`` (where it gives none)."""
    out = {"parent": None, "unknown": unknown, "because": because or unknown, "driver": None, "qos": None}
    out.update(extra)
    return out


def choose(pod, runtime_driver=None, mounts=None):
    """The probe sandbox's cgroup parent from the kubelet's settings ``pod`` (``_kubelet.pod_settings``): dict parent
    (None: none is sent), driver, qos, because (a sentence: where each setting comes from), unknown (why no parent is
    given where the kubelet would give one). ``runtime_driver``: the driver the runtime reports (CRI RuntimeConfig),
    None when it does not; ``mounts``: the cgroup mount points to look in (default: this process's)."""
    if not pod:
        return no_parent(because="no kubelet found on this node: no Pod placement to follow, the runtime's default parent")
    if pod.get("unknown"):
        return no_parent("the kubelet's cgroup settings are %s: no cgroup parent is given" % pod["unknown"])
    driver, root, per_qos = (pod.get(k) or {} for k in ("cgroup_driver", "cgroup_root", "cgroups_per_qos"))
    if per_qos.get("value") is False:
        return no_parent(because="cgroupsPerQOS false (%s): the kubelet sends no cgroup parent either "
                         "(podContainerManagerNoop), the runtime's default" % per_qos.get("source"))
    if per_qos.get("value") is not True:
        return no_parent("cgroupsPerQOS is not a boolean (%s): no cgroup parent is given" % per_qos.get("source"))
    if driver.get("value") not in DRIVERS:
        return no_parent("the kubelet's cgroup driver %r (%s) is neither cgroupfs nor systemd: no cgroup parent is given" % (
            driver.get("value"), driver.get("source")))
    if runtime_driver and runtime_driver != driver["value"]:
        return no_parent("the kubelet is configured with the %s cgroup driver (%s) but the runtime reports %s (CRI "
                         "RuntimeConfig), which a kubelet with the KubeletCgroupDriverFromCRI feature uses instead: the "
                         "driver the kubelet uses cannot be known here, no cgroup parent is given" % (
                             driver["value"], driver.get("source"), runtime_driver))
    components = parse_cgroupfs(root.get("value") or "/") + [NODE_ALLOCATABLE, QOS]
    try:
        parent = to_systemd(components) if driver["value"] == "systemd" else to_cgroupfs(components)
    except ValueError as exc:
        return no_parent("the kubelet's cgroupRoot %r (%s) gives no %s name: %s; no cgroup parent is given" % (
            root.get("value"), root.get("source"), driver["value"], exc))
    because = "the kubelet's %s cgroup driver (%s), cgroupRoot %s (%s)%s: a BestEffort Pod's QoS cgroup %s" % (
        driver["value"], driver.get("source"), root.get("value") or "/", root.get("source"),
        ", the runtime reports the same driver" if runtime_driver else "", parent)
    mounts = cgroup_mounts() if mounts is None else mounts
    there = [m for m in mounts if os.path.isdir(m.rstrip("/") + parent)]
    if not there:
        return no_parent("%s is not in this node's cgroup filesystem (%s): the kubelet has not made it (not running, or "
                         "placing Pods elsewhere) and none is made in its place; no cgroup parent is given" % (
                             because, ", ".join(mounts) or "no cgroup mount seen"), driver=driver["value"], qos=QOS)
    return {"parent": parent, "unknown": None, "driver": driver["value"], "qos": QOS,
            "because": "%s, found under %s; the runtime names the probe's cgroups in it by their ids, which the kubelet "
                       "never takes for a Pod's (no 'pod' in them)" % (because, ", ".join(there))}


def _procs(path):
    """The pids in the cgroup directory ``path`` and below (cgroup.procs of each), [] when none."""
    pids = []
    for d, _dirs, files in os.walk(path):
        if "cgroup.procs" in files:
            try:
                with open(os.path.join(d, "cgroup.procs")) as fh:
                    pids += [int(p) for p in fh.read().split()]
            except (OSError, ValueError):
                continue
    return pids


def left(placement, ids, mounts=None):
    """The cgroup directories of the sandbox/container ``ids`` still in the probe's parent (``choose``)."""
    parent = (placement or {}).get("parent")
    if not parent:
        return []
    mounts = cgroup_mounts() if mounts is None else mounts
    out = []
    for ident in ids:
        if not ID_RE.match(str(ident or "")):
            continue
        for name in child_names(placement.get("driver"), ident):
            out += [d for d in (m.rstrip("/") + parent.rstrip("/") + "/" + name for m in mounts) if os.path.isdir(d)]
    return out


def remove(placement, ids, mounts=None):
    """After the runtime removed the sandbox ``ids`` (the sandbox's and its containers'), remove the cgroups of those
    ids it left in the probe's parent, only where no process is in them: dict parent, left (what the runtime left),
    removed, kept ('path (pids ...)'), error. cgroupfs: rmdir, deepest first (the kernel refuses a directory with a
    process or a child cgroup); a systemd scope is left to systemd, which collects an empty scope itself."""
    out = {"parent": (placement or {}).get("parent"), "left": [], "removed": [], "kept": [], "error": None}
    out["left"] = left(placement, ids, mounts)
    for d in out["left"]:
        pids = _procs(d)
        if pids:
            out["kept"].append("%s (pids %s)" % (d, ", ".join(str(p) for p in pids[:8])))
            continue
        if placement.get("driver") == "systemd":
            out["kept"].append("%s (an empty systemd scope: systemd collects it)" % d)
            continue
        try:
            for sub, _dirs, _files in sorted(os.walk(d), key=lambda w: -w[0].count("/")):
                os.rmdir(sub)
            out["removed"].append(d)
        except OSError as exc:
            out["kept"].append("%s (rmdir: %s)" % (d, exc.strerror or exc))
    if any("pids" in k or "rmdir" in k for k in out["kept"]):
        out["error"] = "the probe's cgroups were not all removed: %s" % "; ".join(out["kept"])
    return out
