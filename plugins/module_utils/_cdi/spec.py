# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE: self-built CDI specs for experiments and fault drills. Not public API.

``build_spec`` writes nothing: it returns a minimal CDI spec of the run's own kind
``gpuprobe.local/gpu-<run id>`` (``run_kind``: no two runs, and no leftover, share a kind) made from
the host's real device nodes and driver root (one device per GPU, named by its index "0", "1", ..., and
a device "all" holding every selected GPU node; spec-level edits carry nvidiactl, nvidia-uvm,
nvidia-uvm-tools and read-only bind mounts of libcuda, libnvidia-ml, libnvidia-ptxjitcompiler and
nvidia-smi). ``VARIANTS`` names the fault drills and the failure each one is predicted to cause.

Safety (docs/safety.md, "Isolation" and "Ownership"): ``write_spec`` refuses /etc/cdi and anything resolving under it; files are named
``gpuprobe-<run id>.yaml`` and carry their owner in the spec's env (GPUPROBE_RUN_ID, GPUPROBE_OWNER
``host:pid:started``, GPUPROBE_CREATED epoch seconds); ``remove_spec`` removes the run's own spec and
``sweep_specs`` only specs of our kind whose run is over (_owner.is_over), never another kind's.

``ensure_spec(..., diff=True)`` also returns Ansible's diff of what it changed (or would, in check mode): this run's
spec file as text before and after, and each swept spec as present -> absent (the module's diff mode).
"""

from __future__ import annotations

import glob
import hashlib
import os
import posixpath
import re
import tempfile
import time

try:
    import yaml
    HAS_YAML = True
except ImportError:  # pragma: no cover - depends on the target host
    yaml = None
    HAS_YAML = False

from ansible_collections.gpuprobe.layers.plugins.module_utils._common import owner as _owner
from ansible_collections.gpuprobe.layers.plugins.module_utils._host.driver import binary_path, library_version, resolve_soname
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.names import minimum_version, validate_vendor_or_class
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.fs import under_root
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.vocab import RUN_ID_RE, SELF_BUILT_SPEC_DIR, check_run_id as _check_run_id

VENDOR = "gpuprobe.local"
CLASS_PREFIX = "gpu-"
# The kind every self-built spec had before kinds were per run; still recognised (and swept when over).
LEGACY_KIND = "gpuprobe.local/gpu"
KIND = LEGACY_KIND  # kept for readers of the old constant; new specs use run_kind(run_id)
# Static CDI specs belong to the administrator: this collection never writes there.
PROTECTED_SPEC_DIR = "/etc/cdi"
CONTAINER_LIB_DIR = "/usr/local/nvidia/lib64"
CONTAINER_BIN_DIR = "/usr/local/nvidia/bin"
MOUNT_OPTIONS = ["ro", "nosuid", "nodev", "bind"]
CONTROL_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")
LIBRARIES = ("libcuda.so.1", "libnvidia-ml.so.1", "libnvidia-ptxjitcompiler.so.1")
STUB_CANDIDATES = ("/usr/local/cuda/lib64/stubs/libcuda.so", "/usr/local/cuda/targets/*/lib/stubs/libcuda.so",
                   "/usr/local/cuda-*/lib64/stubs/libcuda.so", "/usr/local/cuda-*/targets/*/lib/stubs/libcuda.so")
STALE_VERSIONS = ("470.256.02", "535.274.02")
GPU_NODE = re.compile(r"^/dev/nvidia(\d+)$")

VARIANTS = {
    "full": {
        "description": "GPU node(s), nvidiactl, nvidia-uvm(-tools), libcuda, libnvidia-ml, libnvidia-ptxjitcompiler, nvidia-smi",
        "predicted_layer": None,
        "predicted_signature": None,
    },
    "no_ptxjit_mount": {
        "description": "the full spec without the libnvidia-ptxjitcompiler mount",
        "predicted_layer": "compute",
        "predicted_signature": "compute.cuda.CUDA_ERROR_JIT_COMPILER_NOT_FOUND",
    },
    "no_uvm_node": {
        "description": "the full spec without /dev/nvidia-uvm",
        "predicted_layer": "compute",
        "predicted_signature": "compute.cuda.CUDA_ERROR_UNKNOWN",
    },
    "cgroup_read_only": {
        "description": "every device node with cgroup permissions 'r' (compute alone would show CUDA_ERROR_NO_DEVICE)",
        "predicted_layer": "runtime",
        "predicted_signature": "runtime.device_node.open.EPERM",
    },
    "stub_libcuda": {
        "description": "the CUDA toolkit's stub libcuda.so mounted as libcuda.so.1: not a file of the driver, so the edit is "
                       "unaccounted and the probe does not run (alone in a container, cuInit would answer "
                       "CUDA_ERROR_STUB_LIBRARY)",
        "predicted_layer": "cdi",
        "predicted_signature": "cdi.trust.accounted",
    },
    "file_mode_0000": {
        "description": "fileMode 0000 on the GPU node(s), probe run as uid 1000: podman+runc apply the mode (open() EACCES, "
                       "a runtime WARN since the spec asked for it), and CUDA still initialises",
        "probe_user": "1000:1000",  # the drill runs the probe as uid 1000: root ignores file modes
        "predicted_layer": None,
        "predicted_signature": None,
    },
    "missing_hostpath": {
        "description": "an extra bind mount whose hostPath does not exist (the runtime also fails to start: runtime.start.hostpath_missing)",
        "predicted_layer": "cdi",
        "predicted_signature": "cdi.host.mount_source",
    },
    "stale_library": {
        "description": "libcuda's hostPath names libcuda.so.<another driver version>, which does not exist",
        "predicted_layer": "cdi",
        "predicted_signature": "cdi.host.library_version",
    },
}


class SpecError(Exception):
    """The spec cannot be built or written as asked (message says why)."""


def check_run_id(run_id):
    """``run_id`` when it follows the run id rule (_common.vocab; it becomes part of a file name), else SpecError."""
    try:
        return _check_run_id(run_id)
    except ValueError as exc:
        raise SpecError(str(exc))


def run_kind(run_id):
    """The run's own CDI kind: gpuprobe.local/gpu-<run id> (a run id ending in '_', '.' or '-' gets a hash
    suffix, since a CDI class must end with a letter or digit)."""
    check_run_id(run_id)
    cls = CLASS_PREFIX + run_id
    if not run_id[-1].isalnum():
        cls += hashlib.sha256(run_id.encode("utf-8")).hexdigest()[:8]
    why = validate_vendor_or_class(cls, "class")
    if why:  # pragma: no cover - RUN_ID_RE and the suffix make this impossible
        raise SpecError(why)
    return "%s/%s" % (VENDOR, cls)


def is_our_kind(kind):
    return kind == LEGACY_KIND or (isinstance(kind, str) and kind.startswith("%s/%s" % (VENDOR, CLASS_PREFIX)))


def spec_file_name(run_id):
    return "gpuprobe-%s.yaml" % check_run_id(run_id)


def _host_evidence(host):
    return (host or {}).get("evidence") or {}


def _gpu_nodes(root, host, gpus):
    """The GPU node paths (/dev/nvidiaN): the given ``gpus`` (index or path, kept even when absent, for
    drills on nodes without a GPU), else every /dev/nvidiaN present (host record first, else the host's /dev)."""
    if gpus:
        out = []
        for g in gpus:
            text = str(g).strip()
            path = text if text.startswith("/dev/") else ("/dev/nvidia%s" % text if text.isdigit() else text)
            if not GPU_NODE.match(path):
                raise SpecError("gpus entry %r is not a GPU node (/dev/nvidiaN or an index)" % (g,))
            out.append(path)
        return out
    nodes = _host_evidence(host).get("device_nodes")
    if isinstance(nodes, dict) and nodes:
        found = [p for p, info in nodes.items() if GPU_NODE.match(p) and (info or {}).get("exists", True)]
    else:
        found = ["/" + posixpath.relpath(p, root) for p in glob.glob(under_root(root, "/dev/nvidia[0-9]*"))]
        found = [p for p in found if GPU_NODE.match(p)]
    found.sort(key=lambda p: int(GPU_NODE.match(p).group(1)))
    if not found:
        raise SpecError("no GPU device node /dev/nvidiaN under %s: a self-built spec lists the node's own GPUs (only a direct "
                        "task of the module gpuprobe.layers.cdi_spec can name absent ones, with its option gpus)" % (root or "/"))
    return found


def _find_stub(root, stub_libcuda):
    if stub_libcuda:
        path = under_root(root, stub_libcuda)
        if not os.path.isfile(path):
            raise SpecError("stub_libcuda %s does not exist" % path)
        return path
    for pattern in STUB_CANDIDATES:
        for c in sorted(glob.glob(under_root(root, pattern))):
            if os.path.isfile(c):
                return c
    raise SpecError("variant stub_libcuda needs the CUDA toolkit stub libcuda.so: pass stub_libcuda (looked in %s)"
                    % ", ".join(STUB_CANDIDATES))


def _node(path, root):
    node = {"path": path}
    if root not in ("", "/"):
        node["hostPath"] = under_root(root, path)
    return node


def _mount(host_path, container_path):
    return {"hostPath": host_path, "containerPath": container_path, "options": list(MOUNT_OPTIONS)}


def build_spec(run_id, variant="full", root="/", driver_root=None, host=None, stub_libcuda=None, gpus=None,
               owner=None, created=None):
    """The spec (a dict) for ``variant``; raises SpecError when the host lacks what the spec needs.
    ``owner`` (an _owner dict) and ``created`` (epoch seconds) are recorded in the spec's env."""
    check_run_id(run_id)
    if variant not in VARIANTS:
        raise SpecError("unknown variant %r (one of %s)" % (variant, ", ".join(sorted(VARIANTS))))
    root = root or "/"
    driver_root = driver_root or _host_evidence(host).get("driver_root") or "/"
    gpu_nodes = _gpu_nodes(root, host, gpus)
    libs = {}
    for soname in LIBRARIES:
        found = resolve_soname(root, driver_root, soname)
        if found is None:
            raise SpecError("%s not found in driver root %s (under %s)" % (soname, driver_root, root))
        libs[soname] = found
    smi = binary_path(root, driver_root, "nvidia-smi")

    control = [n for n in CONTROL_NODES if os.path.exists(under_root(root, n)) or n == "/dev/nvidiactl"]
    if variant == "no_uvm_node":
        control = [n for n in control if n != "/dev/nvidia-uvm"]
    mounts = []
    for soname in LIBRARIES:
        if variant == "no_ptxjit_mount" and soname.startswith("libnvidia-ptxjitcompiler"):
            continue
        host_path = libs[soname]
        if soname == "libcuda.so.1" and variant == "stub_libcuda":
            host_path = _find_stub(root, stub_libcuda)
        elif soname == "libcuda.so.1" and variant == "stale_library":
            current = library_version(host_path)
            stale = [v for v in STALE_VERSIONS if v != current][0]
            host_path = posixpath.join(posixpath.dirname(host_path), "libcuda.so.%s" % stale)
        mounts.append(_mount(host_path, posixpath.join(CONTAINER_LIB_DIR, soname)))
    if smi:
        mounts.append(_mount(smi, posixpath.join(CONTAINER_BIN_DIR, "nvidia-smi")))
    if variant == "missing_hostpath":
        mounts.append(_mount("/nonexistent/gpuprobe-%s/libgpuprobe-missing.so.1" % run_id,
                             posixpath.join(CONTAINER_LIB_DIR, "libgpuprobe-missing.so.1")))

    def nodes(paths, gpu=False):
        out = []
        for p in paths:
            n = _node(p, root)
            if variant == "cgroup_read_only":
                n["permissions"] = "r"
            if gpu and variant == "file_mode_0000":
                n["fileMode"] = 0
            out.append(n)
        return out

    devices = [{"name": GPU_NODE.match(p).group(1), "containerEdits": {"deviceNodes": nodes([p], gpu=True)}}
               for p in gpu_nodes]
    devices.append({"name": "all", "containerEdits": {"deviceNodes": nodes(gpu_nodes, gpu=True)}})
    spec = {
        "cdiVersion": "0.3.0",
        "kind": run_kind(run_id),
        "devices": devices,
        "containerEdits": {
            "env": ["LD_LIBRARY_PATH=%s" % CONTAINER_LIB_DIR, "GPUPROBE_RUN_ID=%s" % run_id,
                    "GPUPROBE_CDI_VARIANT=%s" % variant, "GPUPROBE_OWNER=%s" % _owner.format_owner(owner),
                    "GPUPROBE_CREATED=%d" % int(time.time() if created is None else created)],
            "deviceNodes": nodes(control),
            "mounts": mounts,
        },
    }
    # The lowest version that the fields used allow (digit device names and hostPath need 0.5.0), so
    # older runtimes' CDI libraries accept the spec too.
    spec["cdiVersion"] = minimum_version(spec)[0]
    return spec


def qualified_devices(spec):
    return ["%s=%s" % (spec["kind"], d["name"]) for d in spec["devices"]]


def _identity(path):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _ancestors(path):
    path = posixpath.normpath(path)
    out = [path]
    while path != "/":
        path = posixpath.dirname(path)
        out.append(path)
    return out


def refuses(spec_dir):
    """Why ``spec_dir`` is refused (it is /etc/cdi or lies under it, by name, through symlinks, or through another
    path to the same directory such as a bind mount: every existing ancestor is compared by (st_dev, st_ino)),
    else None."""
    protected = os.path.realpath(PROTECTED_SPEC_DIR)
    protected_id = _identity(PROTECTED_SPEC_DIR)
    why = "refusing to write CDI specs under %s (%s): static specs belong to the administrator; use %s" % (
        PROTECTED_SPEC_DIR, spec_dir, SELF_BUILT_SPEC_DIR)
    for candidate in (posixpath.normpath(spec_dir), os.path.realpath(spec_dir)):
        for p in (protected, PROTECTED_SPEC_DIR):
            if candidate == p or candidate.startswith(p.rstrip("/") + "/"):
                return why
        if protected_id is not None and any(_identity(a) == protected_id for a in _ancestors(candidate)):
            return why
    return None


def render(spec):
    if not HAS_YAML:
        raise SpecError("PyYAML is required to write CDI specs")
    return yaml.safe_dump(spec, sort_keys=False, default_flow_style=False)


def spec_path(spec_dir, run_id):
    why = refuses(spec_dir)
    if why:
        raise SpecError(why)
    return posixpath.join(spec_dir, spec_file_name(run_id))


def write_spec(spec, spec_dir, run_id):
    """Write ``spec`` atomically to <spec_dir>/gpuprobe-<run_id>.yaml (mode 0644); returns the path.
    Refuses /etc/cdi and anything resolving under it."""
    path = spec_path(spec_dir, run_id)
    if not os.path.isdir(spec_dir):
        os.makedirs(spec_dir, mode=0o755)
    why = refuses(spec_dir) or not_ours_reason(path, run_id)  # again, now that it exists (a symlink created meanwhile)
    if why:
        raise SpecError(why)
    fd, tmp = tempfile.mkstemp(prefix=".gpuprobe-", suffix=".tmp", dir=spec_dir)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(render(spec))
        os.chmod(tmp, 0o644)
        os.rename(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def not_ours_reason(path, run_id):
    """Why the existing file at ``path`` is not this run's spec (another kind, another run), else None."""
    if not os.path.lexists(path):
        return None
    info = spec_owner_info(path)
    if info["ours"] and info["run_id"] == run_id:
        return None
    return "%s exists and is not the self-built spec of run %s (kind %s, run id %s%s): left alone" % (
        path, run_id, info["kind"], info["run_id"], ", %s" % info["error"] if info["error"] else "")


def in_use_reason(path, run_id, owner):
    """Why this run may not write or remove ``path``: it is the spec of another live run given the same run id
    (its owner is a running process of this host that is not ``owner``), else None."""
    if not os.path.lexists(path):
        return None
    info = spec_owner_info(path)
    if info["ours"] and info["run_id"] == run_id and _owner.other_live_owner(info["owner"], owner):
        return ("run id %s is in use by a live run (owner %s, spec %s): two runs must not share a run id; give this "
                "run another verify_run_id, or leave it empty to generate one" % (run_id, _owner.format_owner(info["owner"]), path))
    return None


def remove_spec(spec_dir, run_id):
    """Remove this run's spec; True when a file was removed. A file of that name that is not this run's spec
    (another kind, another run id) is never removed: SpecError."""
    path = spec_path(spec_dir, run_id)
    why = not_ours_reason(path, run_id)
    if why:
        raise SpecError(why)
    try:
        os.unlink(path)
        return True
    except FileNotFoundError:
        return False


def spec_owner_info(path):
    """What a spec file says about its owner: dict kind, run_id, owner, created (epoch; the file's mtime when
    the spec does not say), ours (bool: a regular file of our kind); ``error`` when it cannot be read."""
    info = {"path": path, "kind": None, "run_id": None, "owner": None, "created": None, "ours": False, "error": None}
    try:
        if os.path.islink(path) or not os.path.isfile(path):
            info["error"] = "not a regular file"
            return info
        info["created"] = int(os.stat(path).st_mtime)
        with open(path, "r", encoding="utf-8", errors="replace") as f:
            text = f.read(1024 * 1024)
        doc = yaml.safe_load(text) if HAS_YAML else None
    except (OSError, ValueError, yaml.YAMLError if HAS_YAML else ValueError) as exc:
        info["error"] = str(exc)
        return info
    if not isinstance(doc, dict):
        info["error"] = "not a CDI spec"
        return info
    info["kind"] = doc.get("kind")
    env = ((doc.get("containerEdits") or {}).get("env") or []) if isinstance(doc.get("containerEdits"), dict) else []
    values = dict(str(e).partition("=")[::2] for e in env if isinstance(e, str))
    info["run_id"] = values.get("GPUPROBE_RUN_ID")
    info["owner"] = _owner.parse_owner(values.get("GPUPROBE_OWNER"))
    if str(values.get("GPUPROBE_CREATED", "")).isdigit():
        info["created"] = int(values["GPUPROBE_CREATED"])
    name = posixpath.basename(path)
    # ours: our kind, and the file name is the one its run id gives (exact, never a substring match)
    run_id = info["run_id"]
    ours_named = bool(run_id and RUN_ID_RE.match(run_id)) and name == spec_file_name(run_id)
    info["ours"] = bool(is_our_kind(info["kind"]) and ours_named and info["kind"] in (LEGACY_KIND, run_kind(run_id)))
    return info


def classify_specs(spec_dir, run_id=None, max_age=_owner.DEFAULT_MAX_AGE, now=None):
    """Every gpuprobe-*.yaml spec of our kind in ``spec_dir``: list of (info, over, why)."""
    if refuses(spec_dir):
        raise SpecError(refuses(spec_dir))
    out = []
    for path in sorted(glob.glob(posixpath.join(spec_dir, "gpuprobe-*.yaml"))):
        info = spec_owner_info(path)
        if not info["ours"]:
            continue
        over, why = _owner.is_over(info["run_id"], info["owner"], info["created"], run_id=run_id, max_age=max_age, now=now)
        out.append((info, over, why))
    return out


def sweep_specs(spec_dir, run_id=None, max_age=_owner.DEFAULT_MAX_AGE, keep=None, check_mode=False, now=None):
    """Remove the specs of our kind whose run is over (``run_id``: the caller's own run counts as over);
    ``keep``: a run id whose spec stays whatever it says. Returns {"removed": [paths], "live": [{path, run_id, why}]}."""
    removed, live = [], []
    for info, over, why in classify_specs(spec_dir, run_id=run_id, max_age=max_age, now=now):
        if keep is not None and info["run_id"] == keep:
            continue
        if not over:
            live.append({"path": info["path"], "run_id": info["run_id"], "why": why})
            continue
        if not check_mode:
            try:
                os.unlink(info["path"])
            except FileNotFoundError:
                continue
        removed.append(info["path"])
    return {"removed": removed, "live": live}


def prediction(variant):
    v = VARIANTS[variant]
    return {"layer": v["predicted_layer"], "signature": v["predicted_signature"], "description": v["description"],
            "probe_user": v.get("probe_user")}


def check_options(spec_dir, root="/", driver_root=None, max_age=_owner.DEFAULT_MAX_AGE):
    """SpecError with a clear message for options that cannot work (before anything is written)."""
    if not isinstance(spec_dir, str) or not spec_dir.startswith("/"):
        raise SpecError("spec_dir %r must be an absolute path" % (spec_dir,))
    why = refuses(spec_dir)
    if why:
        raise SpecError(why)
    if os.path.exists(spec_dir) and not os.path.isdir(spec_dir):
        raise SpecError("spec_dir %s exists and is not a directory" % spec_dir)
    if not os.path.isdir(root or "/"):
        raise SpecError("root %s is not a directory" % root)
    if driver_root is not None and not str(driver_root).startswith("/"):
        raise SpecError("driver_root %r must be an absolute path (inside root)" % (driver_root,))
    try:
        _owner.check_max_age(max_age)
    except ValueError as exc:
        raise SpecError(str(exc))


# the most of a spec file's text a diff shows (this run's own spec is a few KiB)
DIFF_TEXT_LIMIT = 256 * 1024


def _diff_text(path):
    """A file's text for a diff ("" when it is not a regular file or cannot be read), cut at DIFF_TEXT_LIMIT."""
    if not os.path.isfile(path) or os.path.islink(path):
        return ""
    try:
        with open(path, "rb") as f:
            data = f.read(DIFF_TEXT_LIMIT + 1)
    except OSError:
        return ""
    text = data[:DIFF_TEXT_LIMIT].decode("utf-8", "replace")
    return text + ("\n... (cut at %d bytes)\n" % DIFF_TEXT_LIMIT if len(data) > DIFF_TEXT_LIMIT else "")


def _file_diff(path, before, after):
    return {"before_header": path, "after_header": path, "before": before, "after": after}


def _removal_diff(path, why):
    return _file_diff(path, {"path": path, "state": "file", "why": why}, {"path": path, "state": "absent"})


def ensure_spec(run_id, state="present", spec_dir=SELF_BUILT_SPEC_DIR, check_mode=False, owner=None,
                max_age=_owner.DEFAULT_MAX_AGE, diff=False, **build_args):
    """The module's one call: build and write (state=present) or remove (state=absent) this run's spec.
    Before writing, specs of our kind whose run is over (owner gone, or older than ``max_age``) are swept.
    Returns a dict: changed, path, kind, devices, variant, spec, prediction, owner, swept, live; with ``diff`` also
    "diff", a list of Ansible diffs of what changed (or would, in check mode): each swept spec present -> absent, then
    this run's spec file as text before -> after ("" where there is no file)."""
    check_run_id(run_id)
    check_options(spec_dir, build_args.get("root") or "/", build_args.get("driver_root"), max_age)
    try:
        owner = _owner.resolve(owner)
    except ValueError as exc:
        raise SpecError(str(exc))
    path = spec_path(spec_dir, run_id)
    variant = build_args.get("variant") or "full"
    out = {"changed": False, "path": path, "kind": run_kind(run_id), "devices": [], "variant": variant, "spec": None,
           "prediction": prediction(variant) if variant in VARIANTS else None, "owner": owner,
           "swept": [], "live": []}
    why = in_use_reason(path, run_id, owner)
    if why:
        raise SpecError(why)
    if state == "absent":
        why = not_ours_reason(path, run_id)
        if why:
            raise SpecError(why)
        out["changed"] = os.path.exists(path)
        if diff:
            out["diff"] = [_file_diff(path, _diff_text(path), "")] if out["changed"] else []
        if out["changed"] and not check_mode:
            remove_spec(spec_dir, run_id)
        return out
    if os.path.isdir(spec_dir):
        swept = sweep_specs(spec_dir, max_age=max_age, keep=run_id, check_mode=check_mode)
        out["swept"], out["live"] = swept["removed"], swept["live"]
    current = None
    created = None
    why = not_ours_reason(path, run_id)
    if why:
        raise SpecError(why)
    if os.path.isfile(path) and not os.path.islink(path):
        created = spec_owner_info(path)["created"]  # the same run writing again: same spec, not a change
        try:
            with open(path, "r", encoding="utf-8") as f:
                current = f.read()
        except OSError:
            current = None
    spec = build_spec(run_id, owner=owner, created=created, **build_args)
    text = render(spec)
    out.update(spec=spec, devices=qualified_devices(spec), changed=current != text or bool(out["swept"]))
    if diff:
        out["diff"] = [_removal_diff(p, "the spec of a run that is over") for p in out["swept"]]
        if current != text:
            out["diff"].append(_file_diff(path, current or "", text))
    if current != text and not check_mode:
        write_spec(spec, spec_dir, run_id)
    return out
