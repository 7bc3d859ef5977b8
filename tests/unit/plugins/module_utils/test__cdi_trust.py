"""cdi.trust.accounted (issue 42, "every edit accounted for"): trust is an allowlist. Every edit of a requested device
must be one a GPU spec legitimately makes (NVIDIA's generators, release by release: tests/unit/fixtures/host/
generators.py) or one the site declared (trusted_edits); any other edit is a FAIL naming it, the gate blocks the probe,
and the verdict can never be COMPUTE_VERIFIED without the check's PASS. Real spec files in a real node tree (real
files, sockets, char devices, owners and modes), read by the cdi layer."""
import os

import pytest
import yaml

import generators
import hostfixture
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import layer as _cdi_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import spec as _cdi_spec
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import trust
from ansible_collections.gpuprobe.layers.plugins.module_utils._node.gate import layer_gate
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, PASS

CHECK = "cdi.trust.accounted"
LIBDIR = generators.LIBDIR
DRIVER = generators.DRIVER
DRIVER_ROOTS = ["/", "/run/nvidia/driver"]


def _record(root, spec, driver_root="/", trusted_edits=None, host=None):
    os.makedirs(os.path.join(root, "cdi"), exist_ok=True)
    with open(os.path.join(root, "cdi", "spec.yaml"), "w") as f:
        yaml.safe_dump(spec, f)
    device = "%s=%s" % (spec["kind"], spec["devices"][0]["name"])
    return _cdi_layer.record(spec_dirs=["/cdi"], discover_runtime_dirs_=False, devices=[device], kinds=[spec["kind"]],
                             root=root, host=host or generators.host_record(root, driver_root), trusted_edits=trusted_edits)


def _trust(record):
    return [c for c in record["checks"] if c["id"] == CHECK]


@pytest.fixture(params=DRIVER_ROOTS)
def tree(request, tmp_path):
    root = str(tmp_path / "node")
    generators.driver_tree(root, request.param)
    return root, request.param


@pytest.mark.parametrize("shape", sorted(generators.SHAPES))
def test_every_generator_shape_is_accounted_for_in_full(tree, shape):
    root, driver_root = tree
    spec = generators.SHAPES[shape](driver_root)
    record = _record(root, spec, driver_root)
    checks = _trust(record)
    assert [c["status"] for c in checks] == [PASS], checks
    rows = list(record["evidence"]["trust"]["devices"].values())[0]
    assert rows and all(r["by"] == "generators" for r in rows), [r for r in rows if r["by"] != "generators"]
    kinds = set(r["kind"] for r in rows)
    assert {"mounts", "deviceNodes", "hooks"} <= kinds
    assert "all %d edits accounted for: %d as NVIDIA's generators write them" % (len(rows), len(rows)) == checks[0]["observed"]
    assert not layer_gate({"host": generators.host_record(root, driver_root), "cdi": record}) or \
        record["status"] == FAIL and not any(c["status"] == FAIL for c in checks)


def test_the_gpu_operators_management_spec_is_accounted_for(tmp_path):
    root = str(tmp_path / "node")
    generators.driver_tree(root, "/run/nvidia/driver")
    spec = generators.operator_management_spec()
    checks = _trust(_record(root, spec, "/run/nvidia/driver"))
    assert [c["status"] for c in checks] == [PASS] and checks[0]["subject"] == "management.nvidia.com/gpu=all"


def _self_built_record(tmp_path, gpus):
    """The cdi record of this collection's own self-built spec over a node tree (driver root /usr/local/nvidia), read
    as verify_node reads it: the spec's host paths under the tree, the layer's root /, the host record's root the tree."""
    root = str(tmp_path / "node")
    hostfixture.build_node(root, gpus=gpus)
    host = generators.host_record(root, "/usr/local/nvidia")
    os.makedirs(os.path.join(root, "usr/local/nvidia/bin"))
    with open(os.path.join(root, "usr/local/nvidia/bin/nvidia-smi"), "w") as f:
        f.write("#!/bin/sh\n")
    spec_dir = str(tmp_path / "run-cdi")
    written = _cdi_spec.ensure_spec("t42", state="present", spec_dir=spec_dir, root=root, driver_root="/usr/local/nvidia", host=host)
    return _cdi_layer.record(spec_dirs=[spec_dir], discover_runtime_dirs_=False, devices=[written["devices"][0]],
                             kinds=[written["kind"]], root="/", host=host)


def test_this_collections_own_self_built_spec_is_accounted_for(tmp_path):
    record = _self_built_record(tmp_path, gpus=2)
    checks = _trust(record)
    assert [c["status"] for c in checks] == [PASS], checks
    env = [r for r in list(record["evidence"]["trust"]["devices"].values())[0] if r["kind"] == "env"]
    assert any("LD_LIBRARY_PATH" in r["edit"] for r in env) and all(r["by"] == "generators" for r in env)


def test_over_a_tree_the_host_checks_find_the_driver_root_where_trust_does(tmp_path):
    """verify_node over a fixture tree: the host record's driver root is a path under its own root, while the cdi layer
    reads the self-built spec's host paths from /. The host checks look the driver's files up there, as the trust check
    does (they looked under /: 'no libcuda.so.<version> in the driver root', the identity NOT_RUN)."""
    record = _self_built_record(tmp_path, gpus=1)
    identity = [c for c in record["checks"] if c["id"] == "cdi.host.libcuda_identity"]
    assert [c["status"] for c in identity] == [PASS], identity
    assert "/usr/local/nvidia/lib64/libcuda.so.%s" % generators.DRIVER in identity[0]["expected"]
    assert [c["status"] for c in _trust(record)] == [PASS]


def _base(driver_root="/"):
    return generators.nvml_spec((1, 18, 0), driver_root)


def _evil(root, path, data=b"import os\n", mode=0o644):
    full = os.path.join(root, path.lstrip("/"))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "wb") as f:
        f.write(data)
    os.chmod(full, mode)
    return path


RO = ["ro", "nosuid", "nodev", "rbind", "rprivate"]


def _mount(host_path, container_path, options=None):
    return {"hostPath": host_path, "containerPath": container_path, "options": list(options or RO)}


# the class: an edit that is not what a GPU spec does, each alone added to an accounted-for spec (the attacks of issue
# 42's review among them: python's ._pth and build-tree landmarks, a script over a link to the interpreter, OpenSSL's
# configuration, an NVML that is not the driver's, a hook of its own)
LIB = "%s/libnvidia-ml.so.%s" % (LIBDIR, DRIVER)


def _nvhook(*args):
    return {"hookName": "createContainer", "path": "/usr/bin/nvidia-cdi-hook", "args": ["nvidia-cdi-hook"] + list(args)}


MEMBERS = {
    "python3._pth beside the interpreter": lambda root: ("mounts", _mount(_evil(root, "/opt/evil/python3._pth", b"/opt/evil/lib\n"), "/usr/bin/python3._pth")),
    "a directory the _pth names": lambda root: ("mounts", _mount(os.path.dirname(_evil(root, "/opt/evil/lib/encodings/__init__.py")), "/opt/evil/lib")),
    "Modules/Setup.local (a build tree's landmark)": lambda root: ("mounts", _mount(_evil(root, "/opt/evil/Setup.local", b""), "/usr/bin/Modules/Setup.local")),
    "a stdlib at /usr/Lib": lambda root: ("mounts", _mount(os.path.dirname(_evil(root, "/opt/evil/Lib/os.py")), "/usr/Lib")),
    "a script over /usr/bin/python (a link to python3)": lambda root: (
        "mounts", _mount(_evil(root, "/opt/evil/python", b"#!/opt/x\n", 0o755), "/usr/bin/python")),
    "openssl.cnf": lambda root: ("mounts", _mount(_evil(root, "/opt/evil/openssl.cnf", b"[openssl_init]\n"), "/usr/lib/ssl/openssl.cnf")),
    "an NVML that is not the driver's": lambda root: ("mounts", _mount(_evil(root, "/opt/evil/libnvidia-ml.so.1", b"\x7fELF"), LIBDIR + "/libnvidia-ml.so.1")),
    "a driver-named file in /tmp": lambda root: ("mounts", _mount(_evil(root, "/tmp/lib/libcuda.so.%s" % DRIVER, b"\x7fELF"), LIBDIR + "/libcuda.so.1")),
    "a driver library not owned by root": lambda root: ("mounts", _mount(_chown(root, LIB), LIB)),
    "a group-writable driver library": lambda root: (
        "mounts", _mount(_chmod(root, "%s/libnvidia-glcore.so.%s" % (LIBDIR, DRIVER), 0o775), "%s/libnvidia-glcore.so.%s" % (LIBDIR, DRIVER))),
    "the driver's library read-write": lambda root: (
        "mounts", _mount("%s/libnvidia-eglcore.so.%s" % (LIBDIR, DRIVER), "%s/libnvidia-eglcore.so.%s" % (LIBDIR, DRIVER), ["nosuid", "nodev", "rbind"])),
    "the driver's library over a stdlib module": lambda root: ("mounts", _mount(LIB, "/usr/lib/python3.11/json/__init__.py")),
    "the driver's library under another name": lambda root: ("mounts", _mount(LIB, LIBDIR + "/libssl.so.3")),
    "the driver's library into the probe's directory": lambda root: ("mounts", _mount(LIB, "/gpuprobe-0123456789abcdef/libnvidia-ml.so.1")),
    "a library directory mounted whole": lambda root: ("mounts", _mount(LIBDIR, "/usr/lib/x86_64-linux-gnu")),
    "a tmpfs": lambda root: ("mounts", {"hostPath": "tmpfs", "containerPath": "/usr/lib/python3.11", "type": "tmpfs", "options": ["rw"]}),
    "OPENSSL_CONF": lambda root: ("env", "OPENSSL_CONF=/opt/evil/openssl.cnf"),
    "OPENSSL_MODULES": lambda root: ("env", "OPENSSL_MODULES=/opt/evil"),
    "LD_PRELOAD": lambda root: ("env", "LD_PRELOAD=/opt/evil/libevil.so"),
    "LD_LIBRARY_PATH to another directory": lambda root: ("env", "LD_LIBRARY_PATH=/opt/evil"),
    "GCONV_PATH": lambda root: ("env", "GCONV_PATH=/opt/evil"),
    "LOCPATH": lambda root: ("env", "LOCPATH=/opt/evil"),
    "PYTHONPATH": lambda root: ("env", "PYTHONPATH=/opt/evil"),
    "NVIDIA_VISIBLE_DEVICES=all": lambda root: ("env", "NVIDIA_VISIBLE_DEVICES=all"),
    "a createRuntime hook of its own": lambda root: ("hooks", {"hookName": "createRuntime", "path": "/usr/bin/true", "args": ["true"]}),
    "a createContainer hook of its own": lambda root: (
        "hooks", {"hookName": "createContainer", "path": "/bin/sh", "args": ["sh", "-c", "sed -i s/x/y/ /gpuprobe*/probe.py"]}),
    "the NVIDIA hook, unknown subcommand": lambda root: (
        "hooks", {"hookName": "createContainer", "path": "/usr/bin/nvidia-cdi-hook", "args": ["nvidia-cdi-hook", "exec", "/bin/sh"]}),
    "the NVIDIA hook linking python3": lambda root: (
        "hooks", _nvhook("create-symlinks", "--link", "libcuda.so.1::/usr/bin/python3")),
    "the NVIDIA hook linking libc": lambda root: (
        "hooks", _nvhook("create-symlinks", "--link", "libcuda.so.1::%s/libc.so.6" % LIBDIR)),
    "the NVIDIA hook, ldcache of another folder": lambda root: (
        "hooks", _nvhook("update-ldcache", "--folder", "/opt/evil")),
    "the NVIDIA hook with LD_PRELOAD": lambda root: (
        "hooks", dict(_nvhook("disable-device-node-modification"), env=["LD_PRELOAD=/opt/evil/x.so"])),
    "the NVIDIA hook's name on another program": lambda root: (
        "hooks", dict(_nvhook("disable-device-node-modification"), path=_evil(root, "/opt/evil/nvidia-cdi-hook", b"#!/bin/sh\n", 0o755))),
    "a block device": lambda root: ("deviceNodes", {"path": "/dev/sda", "type": "b", "major": 8, "minor": 0}),
    "a driver node path over a block device": lambda root: ("deviceNodes", {"path": "/dev/nvidia7", "hostPath": _blk(root)}),
    "a node with an owner": lambda root: ("deviceNodes", {"path": "/dev/nvidia0", "uid": 1000}),
    "a group that is no node's": lambda root: ("additionalGids", 1234),
    # review r42: what a path leads to is only the driver's while no one but root can change the way there
    "a driver library through a link of another user's directory": lambda root: (
        "mounts", _mount(_user_link(root, "/opt/user/lib", os.path.join(root, LIB.lstrip("/")), own_dir=True), LIBDIR + "/libnvidia-ml.so.1")),
    "a driver library through another user's link in a sticky directory": lambda root: (
        "mounts", _mount(_user_link(root, "/tmp/libnvidia-ml.so.1", os.path.join(root, LIB.lstrip("/")), sticky=True), LIBDIR + "/libnvidia-ml.so.1")),
    "the NVIDIA hook through another user's directory link": lambda root: (
        "hooks", dict(_nvhook("disable-device-node-modification"),
                      path=os.path.join(_user_link(root, "/usr/local/bin", os.path.join(root, "usr/bin")), "nvidia-cdi-hook"))),
    # the runtime makes a node from the spec's major:minor when given: the host node's own, and a host node there
    "a driver node path with another device's numbers": lambda root: (
        "deviceNodes", {"path": _mknod(root, "/dev/nvidia1", 195, 1), "type": "c", "major": 1, "minor": 1}),
    "a driver node path the host lacks, made from the spec's numbers": lambda root: (
        "deviceNodes", {"path": "/dev/nvidia9", "type": "c", "major": 195, "minor": 0}),
    # nvml mode's enable-cuda-compat names the running driver only; a lower one puts the image's compat libcuda first
    "the NVIDIA hook's cuda compat for another driver version": lambda root: (
        "hooks", _nvhook("enable-cuda-compat", "--host-driver-version=1.0.0")),
    "the NVIDIA hook's cuda compat from another root": lambda root: (
        "hooks", _nvhook("enable-cuda-compat", "--host-driver-version=%s" % DRIVER, "--cuda-compat-container-root=/opt/evil")),
    "the NVIDIA hook's cuda compat by CUDA version": lambda root: (
        "hooks", _nvhook("enable-cuda-compat", "--host-cuda-version=99.0")),
    # create-symlinks removes what is at LINK: only other names of a driver library the spec mounts there
    "the NVIDIA hook relinking an image library of the same name": lambda root: (
        "hooks", _nvhook("create-symlinks", "--link", "libcrypto.so.1.1::%s/libcrypto.so.3" % LIBDIR)),
    "the NVIDIA hook linking a driver library the spec does not mount": lambda root: (
        "hooks", _nvhook("create-symlinks", "--link", "libnvidia-nvvm.so.4::%s/libnvidia-nvvm.so" % LIBDIR)),
}


def _user_link(root, path, target, own_dir=False, sticky=False):
    """A link at ``path`` of uid 1000 (in a directory of that user, or in a sticky directory) to ``target``: the
    user retargets it between the check and the runtime's use."""
    full = os.path.join(root, path.lstrip("/"))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    if own_dir:
        os.chown(os.path.dirname(full), 1000, 1000)
    if sticky:
        os.chmod(os.path.dirname(full), 0o1777)
    os.symlink(target, full)
    os.lchown(full, 1000, 1000)
    return path


def _mknod(root, path, major, minor):
    hostfixture.mknod_under(root, path, major, minor)
    return path


def _chown(root, path):
    os.chown(os.path.join(root, path.lstrip("/")), 1000, 1000)
    return path


def _chmod(root, path, mode):
    os.chmod(os.path.join(root, path.lstrip("/")), mode)
    return path


def _blk(root):
    full = os.path.join(root, "dev/sdz")
    if not os.path.exists(full):
        os.mknod(full, 0o600 | 0o060000, os.makedev(8, 0))
    return "/dev/sdz"


@pytest.mark.parametrize("member", sorted(MEMBERS))
def test_an_edit_no_gpu_spec_makes_is_unaccounted_and_blocks_the_probe(tmp_path, member):
    root = str(tmp_path / "node")
    generators.driver_tree(root)
    kind, edit = MEMBERS[member](root)
    spec = _base()
    if kind == "additionalGids":
        spec["cdiVersion"] = "0.7.0"
    spec["devices"][0]["containerEdits"].setdefault(kind, []).append(edit)
    record = _record(root, spec)
    checks = _trust(record)
    failed = [c for c in checks if c["status"] == FAIL]
    assert len(failed) == 1 and not any(c["status"] == PASS for c in checks), checks
    assert "not accounted for" in failed[0]["observed"] and failed[0]["subject"] == "nvidia.com/gpu=0"
    assert record["status"] == FAIL
    gate = layer_gate({"host": generators.host_record(root), "cdi": record})
    assert gate and "cdi" in gate, gate


def test_a_field_the_generators_never_write_is_unaccounted(tmp_path):
    root = str(tmp_path / "node")
    generators.driver_tree(root)
    spec = _base()
    spec["cdiVersion"] = "0.7.0"
    spec["devices"][0]["containerEdits"]["intelRdt"] = {"closID": "gpu"}
    failed = [c for c in _trust(_record(root, spec)) if c["status"] == FAIL]
    assert len(failed) == 1 and "containerEdits.intelRdt" in failed[0]["observed"], failed


def test_a_declared_edit_is_accounted_for_and_the_pass_says_which(tmp_path):
    root = str(tmp_path / "node")
    generators.driver_tree(root)
    spec = _base()
    site = _evil(root, "/opt/site/gridd.conf", b"ServerAddress=lic\n")
    spec["containerEdits"]["mounts"].append(_mount(site, "/etc/nvidia/gridd.conf"))
    spec["containerEdits"]["env"].append("SITE_LICENSE=1")
    declared = [{"hostPath": "/opt/site/*", "containerPath": "/etc/nvidia/gridd.conf", "why": "vGPU licence"},
                {"env": "SITE_*"}]
    record = _record(root, spec, trusted_edits=declared)
    checks = _trust(record)
    assert [c["status"] for c in checks] == [PASS]
    assert "2 declared trusted by the site" in checks[0]["observed"] and "/etc/nvidia/gridd.conf" in checks[0]["observed"]
    rows = record["evidence"]["trust"]["devices"]["nvidia.com/gpu=0"]
    assert [r["declared"] for r in rows if r["by"] == "declared"] == [0, 1]
    assert record["evidence"]["trust"]["declared"] == declared
    # a pattern that does not match the edit whole accounts for nothing
    only_host = _record(root, spec, trusted_edits=[{"hostPath": "/opt/site/*", "containerPath": "/etc/other"}, {"env": "SITE_*"}])
    assert [c["status"] for c in _trust(only_host)] == [FAIL]


@pytest.mark.parametrize("given, error", [
    ("not a list item", "must be a mapping"),
    ({}, "names no edit"),
    ({"why": "x"}, "names no edit"),
    ({"hostpath": "/x"}, "unknown key(s) hostpath"),
    ({"env": ""}, "non-empty string"),
    ({"env": 3}, "non-empty string"),
])
def test_malformed_declarations_are_refused_with_the_entry_named(given, error):
    with pytest.raises(ValueError) as exc:
        trust.check_declared([{"env": "OK"}, given])
    assert "trusted_edits[1]" in str(exc.value) and error in str(exc.value)


def test_each_runtime_is_judged_on_the_device_its_own_library_reads(tmp_path):
    """Two runtimes whose CDI libraries read the specs differently (podman 4.3.1: v0.5.2, no annotations, cdiVersion
    <= 0.5.0; containerd 1.7.24: v0.7.2). The higher-priority file has annotations: podman drops it (a WARN: the other
    file still provides the device) and injects the clean device of /etc/cdi; containerd injects the other file's
    device with LD_PRELOAD. Judged on podman's reading alone, that device was never looked at and containerd's probe
    ran with it."""
    from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import cdi_for_runtime

    root = str(tmp_path / "node")
    generators.driver_tree(root)
    clean = generators.nvml_spec((1, 17, 8))
    clean["cdiVersion"] = "0.5.0"
    evil = yaml.safe_load(yaml.safe_dump(clean))
    evil.update(cdiVersion="0.6.0", annotations={"x.example.com/a": "b"})
    evil["devices"][0]["containerEdits"]["env"] = ["LD_PRELOAD=/tmp/evil.so"]
    for d, spec in (("etc/cdi", clean), ("var/run/cdi", evil)):
        os.makedirs(os.path.join(root, d))
        with open(os.path.join(root, d, "nvidia.yaml"), "w") as f:
            yaml.safe_dump(spec, f)
    host = generators.host_record(root)
    versions = {"podman": "4.3.1", "containerd": "1.7.24"}
    host["evidence"].update(tools_probed=True, tools=dict((n, {"path": "/usr/bin/" + n, "version": v, "error": None}) for n, v in versions.items()))
    engines = [{"name": n, "version": v, "usable": True, "cdi_config": {"enabled": True, "spec_dirs": ["/etc/cdi", "/var/run/cdi"]}}
               for n, v in versions.items()]
    record = _cdi_layer.record(spec_dirs=["/etc/cdi", "/var/run/cdi"], discover_runtime_dirs_=False, devices=["nvidia.com/gpu=0"],
                               kinds=["nvidia.com/gpu"], root=root, host=host, engines=engines)
    by_runtime = dict((c.get("runtime"), c) for c in _trust(record))
    assert by_runtime["podman"]["status"] == PASS, by_runtime
    assert by_runtime["containerd"]["status"] == FAIL and "LD_PRELOAD" in by_runtime["containerd"]["observed"], by_runtime
    assert not layer_gate({"host": host, "cdi": cdi_for_runtime(record, "podman")})
    assert "cdi" in layer_gate({"host": host, "cdi": cdi_for_runtime(record, "containerd")})
