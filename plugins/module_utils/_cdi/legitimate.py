# -*- coding: utf-8 -*-
# Copyright (c) gpuprobe.layers contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""PRIVATE (gpuprobe.layers cdi layer): what a GPU spec legitimately does, edit by edit. Not public API.

The allowlist of ``_cdi.trust``: the shapes NVIDIA's CDI generators write, and nothing else. Read in NVIDIA's
container toolkit (github.com/NVIDIA/nvidia-container-toolkit, tags v1.12.0 to v1.20.0; its ``nvcdi`` library is what
``nvidia-ctk cdi generate``, nvidia-cdi-refresh, the GPU Operator's toolkit installer (management spec, driver root
/run/nvidia/driver), NVIDIA's device plugin in CDI mode and the ``nvidia-cdi`` runtime handler that k3s/RKE2 configure
all use; k3s bundles no spec of its own), with the golden specs of its tests (cmd/nvidia-ctk/cdi/generate/
generate_test.go ``TestGenerateSpec``, cmd/nvidia-ctk-installer/toolkit/toolkit_test.go ``TestInstall``,
pkg/nvcdi/lib-imex_test.go) kept as fixtures under tests/unit/fixtures/cdi/generators/:

- device nodes (pkg/nvcdi/common-nvml.go, platform-support/dgpu/nvml.go, lib-imex.go, management.go): ``/dev/nvidiaN``
  and the GPU's ``/dev/dri/cardN``/``renderDN``, ``/dev/nvidiactl``, ``/dev/nvidia-uvm``, ``/dev/nvidia-uvm-tools``,
  ``/dev/nvidia-modeset``, MIG's ``/dev/nvidia-caps/nvidia-capN``, IMEX's ``/dev/nvidia-caps-imex-channels/channelN``;
  ``hostPath`` omitted or the dev root joined with ``path``; up to v1.18 nothing else, from v1.19 also ``major``,
  ``minor``, ``fileMode``, ``permissions: rwm`` and ``gid`` (internal/edits/device.go), never ``uid``; and
  ``additionalGids`` only for the gid of such a node (``getAdditionalGIDs``, v1.19+);
- mounts (pkg/nvcdi/driver-nvml.go, internal/discover/{mounts,graphics,ipc}.go): every ``lib*.so.<driver version>``
  of the driver's library directories (and ``vdpau/``, the X server's modules), the EGL platform libraries, the
  programs (nvidia-smi, nvidia-debugdump, nvidia-persistenced, nvidia-cuda-mps-control/-server, nvidia-imex(-ctl),
  nvidia-xconfig), the GSP firmware ``/lib/firmware/.../nvidia/<version>/gsp*.bin``, the ICD/EGL/X/OptiX
  config files (container path ``/usr/share/<name>`` or ``/etc/<name>`` from v1.16, the host path less the driver
  root before), the IPC sockets of nvidia-persistenced and nvidia-fabricmanager and ``/tmp/nvidia-mps``; the
  container path is the host path less the driver root (``relativeTo``); no ``type``; options ``ro, nosuid, nodev,
  bind`` (up to v1.17), ``ro, nosuid, nodev, rbind, rprivate`` (v1.18+), ``noexec`` added and, from v1.18.2, ``ro``
  dropped for the IPC sockets. This collection's own self-built spec places the driver's libraries and nvidia-smi
  under ``/usr/local/nvidia/{lib64,bin}`` (the layout CUDA images put on their ``LD_LIBRARY_PATH``), by soname;
- hooks (internal/discover/{hooks,ldconfig,symlinks,compat_libs}.go, cmd/nvidia-cdi-hook/): ``createContainer``
  only, the program ``nvidia-ctk`` (``nvidia-ctk hook SUB``, v1.12 to v1.15) or ``nvidia-cdi-hook`` (v1.16+; the
  GPU Operator's ``/usr/local/nvidia/toolkit/nvidia-cdi-hook``), env none or ``NVIDIA_CTK_DEBUG=true|false``
  (v1.17.8+), no timeout; ``update-ldcache [--ldconfig-path P] --folder D...`` (D a directory where the spec mounts
  the driver's libraries), ``create-symlinks --link TARGET::LINK...`` (a library's own names, libGLX_indirect,
  gbm's nvidia-drm_gbm.so, the DRM by-path links), ``chmod --mode 755 --path /dev/dri|/dev/nvidia-caps``,
  ``enable-cuda-compat`` (v1.17.5+), ``disable-device-node-modification`` (v1.18+), ``update-application-profile``
  (v1.20+);
- env (pkg/nvcdi/wrapper.go, driver-nvml.go, lib-nvml.go): ``NVIDIA_VISIBLE_DEVICES=void`` (v1.15+),
  ``NVIDIA_CTK_LIBCUDA_DIR=<dirs>`` (v1.18+), ``NVCT_EMPTY_DEVICE=`` (v1.19+); never LD_LIBRARY_PATH. This
  collection's own self-built spec adds ``LD_LIBRARY_PATH`` (only the directory where it mounts the driver's
  libraries) and ``GPUPROBE_*``.

Not covered (refused unless declared): the DRA driver's MPS and compute-domain claim edits (read-write directory
mounts, CUDA_MPS_*/COMPUTE_DOMAIN_* env), Tegra/CSV and WSL specs, the gds/mofed/gdrcopy/nvswitch modes.

Each rule is a small function over one edit returning why it is accounted for (a sentence), or None.
"""

from __future__ import annotations

import posixpath
import re

from ansible_collections.gpuprobe.layers.plugins.module_utils._host.driver import BIN_DIRS, LIB_DIRS

# -- device nodes ----------------------------------------------------------------------------------------------------
DEVICE_NODE = re.compile(r"^/dev/(nvidia[0-9]+|nvidiactl|nvidia-uvm|nvidia-uvm-tools|nvidia-modeset|"
                         r"nvidia-caps/nvidia-cap[0-9]+|nvidia-caps-imex-channels/channel[0-9]+|"
                         r"dri/card[0-9]+|dri/renderD[0-9]+)$")

# -- the driver's files, by name ---------------------------------------------------------------------------------------
VERSION = r"[0-9]+\.[0-9]+(\.[0-9]+)?"
# the driver's libraries by name (the file and its soname links): what the generators mount and link whatever version
LIBRARY = re.compile(r"^(libcuda|libcudadebugger|libnvidia-[a-z0-9_-]+|libnvcuvid|libnvoptix|libGLX_nvidia|"
                     r"libEGL_nvidia|libGLESv1_CM_nvidia|libGLESv2_nvidia|libvdpau_nvidia|libglxserver_nvidia|"
                     r"nvidia_drv|nvidia-drm_gbm)\.so(\.[0-9]+)*$")
# any library named with the running driver's version (getVersionLibs: Locate("*.so." + version))
VERSIONED_LIBRARY = r"^lib[A-Za-z0-9_+-]+\.so\.%s$"
PROGRAM = re.compile(r"^nvidia-(smi|debugdump|persistenced|cuda-mps-control|cuda-mps-server|imex|imex-ctl|xconfig)$")
PROGRAM_DIR = re.compile(r"^/(usr/)?(local/)?s?bin$")
FIRMWARE = re.compile(r"^/(usr/)?lib/firmware(/updates)?(/[^/]+)?/nvidia/%s/gsp[^/]*\.bin$" % VERSION)
# config files by their name below a config dir (graphics.go newGraphicsConfigsDiscoverer, newVulkanConfigsDiscover)
CONFIG = re.compile(r"(^|/)(?P<name>vulkan/(icd\.d|implicit_layer\.d)/nvidia_(icd|layers)(\.(x86_64|aarch64))?\.json|"
                    r"glvnd/egl_vendor\.d/10_nvidia\.json|"
                    r"egl/egl_external_platform\.d/(09_nvidia_wayland2|10_nvidia_wayland|15_nvidia_gbm|20_nvidia_xcb|"
                    r"20_nvidia_xlib)\.json|nvidia/nvoptix\.bin|X11/xorg\.conf\.d/(10-nvidia|nvidia-drm-outputclass)\.conf|"
                    r"OpenCL/vendors/nvidia\.icd)$")
CONFIG_DIRS = ("/etc", "/usr/share", "/usr/local/share", "")
# IPC sockets and the MPS pipe directory (internal/discover/ipc.go), the same path in the container
IPC = re.compile(r"^/((var/)?run/nvidia-persistenced/socket|(var/)?run/nvidia-fabricmanager/socket|tmp/nvidia-mps)$")
# the library subdirectories a driver keeps (vdpau, gbm, the X server's modules; Debian's nvidia/current)
LIB_SUBDIRS = ("vdpau", "gbm", "nvidia/current", "nvidia/xorg", "xorg/modules/drivers", "xorg/modules/extensions",
               "xorg/modules/updates/drivers", "xorg/modules/updates/extensions")
# where this collection's own self-built spec gives a container the driver's libraries and programs
CONTAINER_LIB_DIRS = ("/usr/local/nvidia/lib64", "/usr/local/nvidia/lib")
CONTAINER_BIN_DIRS = ("/usr/local/nvidia/bin",)
MOUNT_OPTIONS = frozenset(("ro", "nosuid", "nodev", "bind", "rbind", "rprivate", "noexec"))

# -- hooks -----------------------------------------------------------------------------------------------------------
HOOK_PROGRAMS = ("nvidia-cdi-hook", "nvidia-ctk")
# where the hook program is installed: the toolkit's packages (/usr/bin), the GPU Operator's toolkit directory
HOOK_DIRS = ("/usr/bin", "/usr/local/bin", "/usr/local/nvidia/toolkit")
HOOK_NAMES = ("createContainer",)
HOOK_ENV = re.compile(r"^NVIDIA_CTK_DEBUG=(true|false)$")
# subcommand -> {flag: kind of its value}; a flag not listed is not the generators'
HOOK_FLAGS = {
    "create-symlinks": {"--link": "link"},
    "update-ldcache": {"--folder": "folder", "--ldconfig-path": "ldconfig"},
    # nvml mode writes only --host-driver-version=<the running driver's version> (pkg/nvcdi/driver-nvml.go v1.17.5-v1.20:
    # EnableCUDACompatHookOptions{HostDriverVersion: version}); --host-cuda-version and --cuda-compat-container-root
    # are the Tegra/CSV mode's (pkg/nvcdi/lib-csv.go), not covered. A lower version makes the hook put the image's
    # CUDA compat libcuda first on the loader's path: a driver library that is not the host's
    "enable-cuda-compat": {"--host-driver-version": "version"},
    "chmod": {"--mode": "mode", "--path": "chmod_path"},
    "disable-device-node-modification": {},
    "update-application-profile": {},
}
LINK_TARGET = re.compile(r"^(\.\./)?(lib[^/]+\.so[^/]*|card[0-9]+|renderD[0-9]+)$")
BY_PATH = re.compile(r"^pci-[0-9a-f:.]+-(card|render)$")

# -- env -------------------------------------------------------------------------------------------------------------
ENV_VALUES = {"NVIDIA_VISIBLE_DEVICES": re.compile(r"^void$"), "NVCT_EMPTY_DEVICE": re.compile(r"^$"),
              "NVIDIA_CTK_LIBCUDA_DIR": re.compile(r"^/[^:]*(:/[^:]*)*$")}
OWN_ENV = re.compile(r"^GPUPROBE_(RUN_ID|CDI_VARIANT|OWNER|CREATED)$")


def clean(path):
    """A container path as runc cleans it."""
    return "/" + posixpath.normpath("/" + str(path or "")).lstrip("/")


def stem(name):
    """The library a file name belongs to (libcuda for libcuda.so.580.159.04), or None."""
    return name.split(".so", 1)[0] if ".so" in name and name.startswith(("lib", "nvidia")) else None


def is_library(name, driver_version):
    return bool(LIBRARY.match(name) or (driver_version and re.match(VERSIONED_LIBRARY % re.escape(driver_version), name)))


def library_dirs(prefix="/"):
    """The directories under ``prefix`` where a driver keeps libraries."""
    dirs = []
    for sub in LIB_DIRS:
        base = posixpath.join(prefix, sub)
        dirs.append(base)
        dirs += [posixpath.join(base, s) for s in LIB_SUBDIRS]
    return dirs


def driver_file(rel, name, kind, driver_version):
    """What kind of driver file a host file is (``rel``: its path relative to the driver root, ``/``-rooted;
    ``name``: its file name; ``kind``: 'file', 'dir', 'socket'), or None."""
    if kind == "file" and is_library(name, driver_version) and posixpath.dirname(rel) in library_dirs():
        return "library"
    in_program_dir = bool(PROGRAM_DIR.match(posixpath.dirname(rel))) or posixpath.dirname(rel) in ["/" + d for d in BIN_DIRS]
    if kind == "file" and PROGRAM.match(name) and in_program_dir:
        return "program"
    if kind == "file" and FIRMWARE.match(rel):
        return "firmware"
    m = CONFIG.search(rel)
    if kind == "file" and m and rel[:m.start("name")].rstrip("/") in CONFIG_DIRS:
        return "config"
    if kind in ("socket", "dir", "file") and IPC.match(rel):
        return "ipc"
    return None


def placed(kind, rel, host_path, container_path, real_name):
    """Why ``container_path`` is where the generators place a driver file of ``kind`` (``rel``: its path relative to
    the driver root; ``host_path``: the spec's hostPath as a node path; ``real_name``: the file's own name), or None."""
    target = clean(container_path)
    if target == clean(host_path):
        return "at its own path"
    if target == clean(rel):
        return "at its path in the driver root"
    name = posixpath.basename(target)
    if kind == "config":
        m = CONFIG.search(rel)
        if target in ("/usr/share/" + m.group("name"), "/etc/" + m.group("name")):
            return "at the generators' config path"
    if kind == "library" and posixpath.dirname(target) in CONTAINER_LIB_DIRS + tuple(library_dirs()) \
            and stem(name) and stem(name) == stem(real_name) and re.match(r"^[^/]+\.so(\.[0-9]+)*$", name):
        return "in a library directory, named as %s" % stem(real_name)
    if kind == "program" and posixpath.dirname(target) in CONTAINER_BIN_DIRS and name == real_name:
        return "in a program directory"
    return None


def options_ok(options, kind):
    """Why a driver mount's options are the generators' (read-only bind; an IPC socket may be read-write), or None."""
    opts = [str(o) for o in options or []]
    if not ("bind" in opts or "rbind" in opts) or any(o not in MOUNT_OPTIONS for o in opts):
        return None
    if "ro" not in opts and kind != "ipc":
        return None
    return "%s %s" % ("read-only" if "ro" in opts else "read-write (an IPC socket)", "rbind" if "rbind" in opts else "bind")


def flag_pairs(args):
    """[(flag, value)] of a hook's arguments after its subcommand; a bare word is (word, None)."""
    out, i = [], 0
    while i < len(args):
        arg = args[i]
        if arg.startswith("--") and "=" in arg:
            flag, value = arg.split("=", 1)
            out.append((flag, value))
        elif arg.startswith("--") and i + 1 < len(args) and not args[i + 1].startswith("--"):
            out.append((arg, args[i + 1]))
            i += 1
        else:
            out.append((arg, None))
        i += 1
    return out


def hook_subcommand(path, args):
    """(subcommand, the arguments after it) of a hook whose program is one of HOOK_PROGRAMS, else (None, [])."""
    program = posixpath.basename(str(path or ""))
    if program not in HOOK_PROGRAMS or not args or args[0] != program:
        return None, []
    rest = list(args[1:])
    if program == "nvidia-ctk":
        if rest[:1] != ["hook"]:
            return None, []
        rest = rest[1:]
    if not rest or rest[0] not in HOOK_FLAGS:
        return None, []
    return rest[0], rest[1:]


def link_ok(value, lib_dirs, dev_prefixes):
    """A create-symlinks --link TARGET::LINK as the generators write it: another name of a driver library the spec
    mounts in that directory (``lib_dirs``: container directory -> the names, by stem, of the driver libraries mounted
    there; internal/discover/symlinks.go: libcuda.so, libGLX_indirect.so.0 for libGLX_nvidia, libnvidia-opticalflow.so,
    the sonames; graphics.go: gbm/nvidia-drm_gbm.so for ../libnvidia-allocator.so.1, libnvidia-vulkan-producer.so,
    libglxserver_nvidia.so), or a DRM node's /dev/dri/by-path link; TARGET relative. The hook removes a file at LINK
    (create-symlinks.go createLink), so a name of a library the spec does not mount (libcrypto.so.3 over the image's
    own) is not the generators'."""
    if not value or "::" not in value:
        return False
    target, link = value.split("::", 1)
    if not LINK_TARGET.match(target) or not link.startswith("/"):
        return False
    link = clean(link)
    directory, name = posixpath.dirname(link), posixpath.basename(link)
    if BY_PATH.match(name):
        return any(directory == clean(p + "/dev/dri/by-path") for p in dev_prefixes) and "/" in target
    if directory.endswith("/gbm"):
        return "libnvidia-allocator" in lib_dirs.get(directory[:-4], ()) and name == "nvidia-drm_gbm.so" and \
            target == "../libnvidia-allocator.so.1"
    if directory not in lib_dirs or "/" in target or stem(target) not in lib_dirs[directory]:
        return False
    if name == "libGLX_indirect.so.0":
        return stem(target) == "libGLX_nvidia"
    return bool(stem(name)) and stem(name) == stem(target) and bool(re.match(r"^[^/]+\.so(\.[0-9]+)*$", name))


def flag_value_ok(kind, value, lib_dirs, dev_prefixes, driver_version=None):
    """Whether one hook flag's value has the generators' shape (``lib_dirs``: as link_ok; ``driver_version``: the
    running driver's, the only --host-driver-version the generators write)."""
    if value is None:
        return False
    checks = {
        "link": lambda v: link_ok(v, lib_dirs, dev_prefixes),
        "folder": lambda v: clean(v) in lib_dirs,
        "ldconfig": lambda v: bool(re.match(r"^@?/(usr/)?s?bin/ldconfig(\.real)?$", v)),
        "version": lambda v: bool(driver_version) and v == driver_version,
        "mode": lambda v: v == "755",
        "chmod_path": lambda v: clean(v) in ("/dev/dri", "/dev/nvidia-caps"),
    }
    return checks[kind](value)


def env_ok(key, value, mounted_lib_dirs):
    """Why an env edit is one the generators (or this collection's own spec) write, or None."""
    if key in ENV_VALUES:
        return "NVIDIA's generators' %s" % key if ENV_VALUES[key].match(value) else None
    if OWN_ENV.match(key):
        return "this collection's own spec's %s" % key
    if key == "LD_LIBRARY_PATH":
        dirs = [clean(d) for d in value.split(":")]
        if value and all(d in mounted_lib_dirs and d in CONTAINER_LIB_DIRS for d in dirs):
            return "this collection's own spec's LD_LIBRARY_PATH: only %s, where the spec mounts the driver's libraries" % (
                ", ".join(dirs))
    return None
