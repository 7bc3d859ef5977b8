"""Pure parts of the runtime layer: start-error classification (real podman 4.3.1/runc 1.1.5 messages),
edit-by-edit comparison, the loader's libcuda, argv."""
import os
import posixpath

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import catalogue as _runtime_catalogue
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import compare as _runtime_compare
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import adapters as _runtime_adapters
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import layer as _runtime_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import select as _runtime_select
from ansible_collections.gpuprobe.layers.plugins.module_utils._host import busy as _busy
from ansible_collections.gpuprobe.layers.plugins.module_utils._common import options as _options
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS, WARN, LayerBuilder

# Messages observed on this machine (podman 4.3.1, runc 1.1.5) and on the H200.
PODMAN_ERRORS = [
    ("Error: setting up CDI devices: unresolvable CDI devices gpuprobe.local/gpu=1", "runtime.start.cdi_unresolvable"),
    ('Error: setting up CDI devices: failed to inject devices: failed to stat CDI host device "/tmp/gpt/dev/nvidiaX": '
     "no such file or directory", "runtime.start.hostpath_missing"),
    ("Error: runc: runc create failed: unable to start container process: error during container init: error mounting "
     '"/tmp/gpt/lib/nolib" to rootfs at "/usr/lib/x86_64-linux-gnu/libcuda.so.1": stat /tmp/gpt/lib/nolib: no such '
     "file or directory: OCI runtime attempted to invoke a command that was not found", "runtime.start.hostpath_missing"),
    ('Error: runc: runc create failed: unable to start container process: exec: "/etc/passwd": permission denied: '
     "OCI permission denied", "runtime.start.permission_denied"),
    ('Error: runc: runc create failed: unable to start container process: exec: "true": executable file not found in '
     "$PATH: OCI runtime attempted to invoke a command that was not found", "runtime.start.oci_error"),
    ("Error: localhost/nope:1: image not known", "runtime.start.image_missing"),
    ('Error: initializing source docker://localhost/nope:1: pinging container registry localhost: Get '
     '"https://localhost/v2/": dial tcp 127.0.0.1:443: connect: connection refused', "runtime.start.image_missing"),
    ("something nobody has seen", "runtime.start.failed"),
]

# Messages observed through containerd 1.7.24's CRI (the adapter's "Error: <call>: <code>: <details>") and dockerd 26.1.5
# (docker CLI 26.1.5), both with runc 1.1.5, on this machine (tests/integration/test_engine_drills.py).
ENGINE_ERRORS = [
    ("Error: CreateContainer: UNKNOWN: failed to create containerd container: CDI device injection failed: unresolvable "
     "CDI devices gpuprobe.local/gpu-t861c8dd39c=t861c8dd39c", "runtime.start.cdi_unresolvable"),
    ("Error: StartContainer: UNKNOWN: failed to create containerd task: failed to create shim task: OCI runtime create "
     "failed: runc create failed: unable to start container process: error during container init: error mounting "
     '"/tmp/t/lib/absent.so.1" to rootfs at "/usr/lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.1": stat '
     "/tmp/t/lib/absent.so.1: no such file or directory: unknown", "runtime.start.hostpath_missing"),
    ("Error: StartContainer: UNKNOWN: failed to create containerd task: failed to create shim task: OCI runtime create "
     'failed: runc create failed: unable to start container process: exec: "python3": executable file not found in '
     "$PATH: unknown", "runtime.start.oci_error"),
    ("Error: StartContainer: UNKNOWN: failed to create containerd task: failed to create shim task: OCI runtime create "
     "failed: runc create failed: unable to start container process: error during container init: error running hook "
     "#0: error running hook: exit status 3, stdout: , stderr: gpuprobe test hook refuses: unknown", "runtime.start.oci_error"),
    ('Error: PullImage: UNKNOWN: failed to pull and unpack image "localhost/gpuprobe-absent:none": failed to resolve '
     'reference "localhost/gpuprobe-absent:none": failed to do request: Head "http://localhost/v2/gpuprobe-absent/'
     'manifests/none": dial tcp 127.0.0.1:80: connect: connection refused', "runtime.start.image_missing"),
    ("docker: Error response from daemon: CDI device injection failed: unresolvable CDI devices "
     "gpuprobe.local/gpu-t920d4fdb87=t920d4fdb87.", "runtime.start.cdi_unresolvable"),
    ("docker: Error response from daemon: failed to create task for container: failed to create shim task: OCI runtime "
     "create failed: runc create failed: unable to start container process: error during container init: error mounting "
     '"/tmp/t/lib/absent.so.1" to rootfs at "/usr/lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.1": stat '
     "/tmp/t/lib/absent.so.1: no such file or directory: unknown.", "runtime.start.hostpath_missing"),
    ("docker: Error response from daemon: No such image: localhost/gpuprobe-absent:none.", "runtime.start.image_missing"),
]


@pytest.mark.parametrize("message,signature", PODMAN_ERRORS + ENGINE_ERRORS)
def test_classify_start_error(message, signature):
    assert _runtime_catalogue.classify_start_error(message) == signature
    assert signature in _runtime_catalogue.SIGNATURES


def test_timeout_wins():
    assert _runtime_catalogue.classify_start_error("", timed_out=True) == "runtime.start.timeout"


def test_error_line_picks_the_runtime_error():
    text = 'time="x" level=warning msg="Failed, retrying"\nError: localhost/nope:1: image not known\n'
    assert _runtime_select.error_line(text) == "Error: localhost/nope:1: image not known"


@pytest.mark.parametrize("errno_name,sig", [("EPERM", "runtime.device_node.open.EPERM"),
                                            ("EACCES", "runtime.device_node.open.EACCES"),
                                            ("ENXIO", "runtime.device_node.open.ENXIO"),
                                            ("EIO", "runtime.device_node.open.other")])
def test_open_signature(errno_name, sig):
    assert _runtime_catalogue.open_signature(errno_name) == sig


@pytest.mark.parametrize("value,expected", [(None, None), ("", None), (0, 0), (0o666, 0o666), ("0666", 0o666),
                                            ("438", 438), ("x", None)])
def test_parse_mode(value, expected):
    assert _runtime_compare._parse_mode(value) == expected


def _builder():
    return LayerBuilder("runtime", _runtime_catalogue.CHECKS)


def _node(present=True, major=195, minor=0, mode="0666", opened="OK"):
    if not present:
        return {"present": False}
    return {"present": True, "type": "c", "major": major, "minor": minor, "mode": mode, "open": opened,
            "open_error": None if opened == "OK" else "x"}


@pytest.mark.parametrize("observed,expect", [
    (_node(), {"runtime.device_node.present": "PASS", "runtime.device_node.type": "PASS", "runtime.device_node.open": "PASS"}),
    (_node(present=False), {"runtime.device_node.present": "FAIL"}),
    (_node(minor=1), {"runtime.device_node.present": "PASS", "runtime.device_node.type": "FAIL",
                      "runtime.device_node.open": "PASS"}),
    (_node(opened="EPERM"), {"runtime.device_node.present": "PASS", "runtime.device_node.type": "PASS",
                             "runtime.device_node.open": "FAIL"}),
])
def test_compare_nodes(observed, expect):
    b = _builder()
    _runtime_compare.compare_nodes(b, [{"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0}], {"/dev/nvidia0": observed})
    assert dict((c["id"], c["status"]) for c in b.checks) == expect


@pytest.mark.parametrize("mode,status", [("0000", "PASS"), ("0666", "WARN")])
def test_file_mode_not_applied_is_a_warning(mode, status):
    b = _builder()
    _runtime_compare.compare_nodes(b, [{"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0, "fileMode": 0}],
                                   {"/dev/nvidia0": _node(mode=mode)})
    assert [c["status"] for c in b.checks if c["id"] == "runtime.device_node.mode"] == [status]


@pytest.mark.parametrize("file_mode,mode,opened,status", [
    (0, "0000", "EACCES", "WARN"),    # the spec's fileMode, applied as asked, denies the container user (H200 evidence)
    (None, "0600", "EACCES", "FAIL"),  # no fileMode in the spec: the mode/owner the container got denies it
    (0o666, "0600", "EACCES", "FAIL"),  # the spec asked for 0666 and did not get it
    (0, "0000", "EPERM", "FAIL"),     # the device cgroup, whatever the mode
])
def test_open_denied_by_the_specs_own_file_mode_is_a_warning(file_mode, mode, opened, status):
    b = _builder()
    entry = {"path": "/dev/nvidia0", "type": "c", "major": 195, "minor": 0}
    if file_mode is not None:
        entry["fileMode"] = file_mode
    _runtime_compare.compare_nodes(b, [entry], {"/dev/nvidia0": _node(mode=mode, opened=opened)})
    assert [c["status"] for c in b.checks if c["id"] == "runtime.device_node.open"] == [status]


def test_compare_mounts_and_env():
    b = _builder()
    mounts = [{"mount_point": "/usr/lib/libcuda.so.1", "root": "/usr/local/nvidia/lib64/libcuda.so.1", "fstype": "ext4",
               "options": ["ro", "nosuid"]},
              {"mount_point": "/usr/lib/libnvidia-ml.so.1", "root": "/other/file", "fstype": "ext4", "options": ["rw"]}]
    expected = [{"hostPath": "/nonexistent/x/libcuda.so.1", "containerPath": "/usr/lib/libcuda.so.1", "options": ["ro", "bind"]},
                {"hostPath": "/nonexistent/x/libnvidia-ml.so.1", "containerPath": "/usr/lib/libnvidia-ml.so.1",
                 "options": ["ro", "bind"]},
                {"hostPath": "/nonexistent/x/libnvidia-ptxjitcompiler.so.1",
                 "containerPath": "/usr/lib/libnvidia-ptxjitcompiler.so.1", "options": ["ro", "bind"]}]
    _runtime_compare.compare_mounts(b, expected, mounts)
    _runtime_compare.compare_env(b, ["A=1", "B=2", "C=3"], {"A": "1", "B": "x"})
    got = [(c["id"], c["subject"], c["status"]) for c in b.checks]
    assert got == [
        ("runtime.mount.present", "/usr/lib/libcuda.so.1", "PASS"),
        ("runtime.mount.source", "/usr/lib/libcuda.so.1", "PASS"),
        ("runtime.mount.present", "/usr/lib/libnvidia-ml.so.1", "PASS"),
        ("runtime.mount.source", "/usr/lib/libnvidia-ml.so.1", "WARN"),
        ("runtime.mount.present", "/usr/lib/libnvidia-ptxjitcompiler.so.1", "FAIL"),
        ("runtime.env.value", "A", "PASS"),
        ("runtime.env.value", "B", "FAIL"),
        ("runtime.env.value", "C", "FAIL"),
    ]


def test_build_argv_isolates_and_labels():
    argv = _runtime_adapters.build_argv({"name": "podman", "path": "/usr/bin/podman"}, "gpuprobe-r1-abc", "r1", "img:1",
                                        ["gpuprobe.local/gpu=0"], "/tmp/p.py", {"compute": True}, user="1000:1000")
    assert argv[:3] == ["/usr/bin/podman", "run", "--rm"]
    inside = argv[-2]
    assert _runtime_catalogue.PROBE_CONTAINER_DIR_RE.match(posixpath.dirname(inside)) and inside.endswith("/probe.py"), inside
    for flag in ("--network=none", "--pull=never", "gpuprobe.run=r1", "gpuprobe.local/gpu=0",
                 "/tmp/p.py:%s:ro" % inside, "1000:1000"):
        assert flag in argv
    assert argv[-5:-1] == ["img:1", "-I", "-S", inside]  # an isolated interpreter in the container


def test_the_probe_path_in_the_container_is_drawn_per_run_and_refused_to_specs():
    # issue 32: a spec that mounts a file at a fixed probe path would run instead of the probe; the path is drawn per
    # run, and no spec edit is accounted for there (issue 42: the cdi layer's allowlist places the driver's files
    # only where the generators put them), so the device is refused before the container starts
    from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import legitimate
    engine = {"name": "podman", "path": "/usr/bin/podman"}
    paths = set(_runtime_adapters.build_argv(engine, "gpuprobe-r1-abc", "r1", "img:1", ["k.io/c=0"], "/tmp/p.py", {})[-2]
                for _run in range(20))
    paths |= set(_runtime_catalogue.probe_in_container() for _run in range(20))
    assert len(paths) == 40 and "/gpuprobe/probe.py" not in paths
    for path in paths | {"/gpuprobe/probe.py"}:
        for target in (path, posixpath.dirname(path), posixpath.join(posixpath.dirname(path), "libcuda.so.1")):
            for kind, name in (("library", "libcuda.so.1"), ("program", "nvidia-smi"), ("config", "10_nvidia.json")):
                rel = "/usr/share/glvnd/egl_vendor.d/10_nvidia.json" if kind == "config" else "/usr/lib/x86_64-linux-gnu/" + name
                assert legitimate.placed(kind, rel, rel, target, name) is None, (target, kind)
    fixed = _runtime_adapters.build_argv(engine, "gpuprobe-r1-abc", "r1", "img:1", ["k.io/c=0"], "/tmp/p.py", {},
                                         in_container="/gpuprobe-0123456789abcdef/probe.py")
    assert fixed[-2] == "/gpuprobe-0123456789abcdef/probe.py" and "/tmp/p.py:/gpuprobe-0123456789abcdef/probe.py:ro" in fixed


@pytest.mark.parametrize("requested", ["containerd", "crio"])
def test_cri_runtime_without_an_engine_is_not_run(requested, tmp_path):
    # nothing serves the socket (or the CRI adapter is not there): NOT_RUN with the reason, no container
    record, probe = _runtime_layer.record({"run_id": "r1", "image": "i", "cdi_devices": ["k/c=0"], "runtime": requested,
                                           "runtime_endpoint": "unix://%s/none.sock" % tmp_path})
    assert record["status"] == "NOT_RUN" and record["reason"] and probe is None
    assert record["evidence"]["engine"]["name"] == requested


def test_check_mode_and_no_device_start_nothing():
    record, probe = _runtime_layer.record({"run_id": "r1", "image": "i", "cdi_devices": ["k/c=0"]}, check_mode=True)
    assert record["status"] == "NOT_RUN" and record["reason"].startswith("check mode") and probe is None
    record, probe = _runtime_layer.record({"run_id": "r1", "image": "i", "cdi_devices": []})
    assert record["status"] == "NOT_RUN" and "no CDI device" in record["reason"]


@pytest.mark.parametrize("run_id", ["", "../x", "a b", "x" * 64])
def test_bad_run_id(run_id):
    with pytest.raises(ValueError):
        _runtime_layer.record({"run_id": run_id, "image": "i", "cdi_devices": ["k/c=0"]})


@pytest.mark.parametrize("host,allow,expect", [
    ({"evidence": {"nvml": {"ok": True, "gpus": [{"index": 0, "uuid": "GPU-a", "compute_processes": [{"pid": 7}]},
                                                 {"index": 1, "uuid": "GPU-b", "compute_processes": []}]}}},
     False, {"idle_uuids": ["GPU-b"]}),
    (None, False, {"skip_compute_reason": _busy.UNKNOWN_BUSY, "idle_uuids": []}),
    (None, True, {}),
])
def test_probe_config_passes_the_idle_gpus_alone(host, allow, expect):
    edits = {"deviceNodes": [{"path": "/dev/nvidia0"}]}
    config = _runtime_layer._probe_config(edits, True, _busy.busy_plan(host, allow))  # pylint: disable=protected-access
    keys = dict((k, config.pop(k)) for k in ("token", "a", "b"))
    assert config == dict({"nodes": ["/dev/nvidia0"], "compute": True, "resolve_paths": ["/dev/nvidia0"], "spec_mounts": []},
                          **expect)
    again = _runtime_layer._probe_config(edits, True, _busy.busy_plan(host, allow))  # pylint: disable=protected-access
    assert len(keys["token"]) == 16 and keys["token"] != again["token"]  # a fresh token and kernel per run
    assert (keys["a"], keys["b"]) != (again["a"], again["b"]) and keys["a"] >= 2 and keys["b"] >= 1


# ---------------------------------------------------------------------------------------------------
# runtime.loader.libcuda on the inventory of the real probe (compiled libcuda files on LD_LIBRARY_PATH)

def _probe_inventory(ld_library_path):
    import subprocess  # pylint: disable=import-outside-toplevel
    import sys  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuprobe.layers.plugins.module_utils._probe import script as _probe  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuprobe.layers.plugins.module_utils._probe import contract as _probe_contract  # pylint: disable=import-outside-toplevel
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LD_LIBRARY_PATH": ld_library_path}
    out = subprocess.run([sys.executable, _probe.__file__, '{"compute": false}'], env=env, capture_output=True, text=True,
                         timeout=60, check=True).stdout
    return _probe_contract.parse_output(out)["inventory"]


@pytest.fixture
def libs(tmp_path):
    import shutil  # pylint: disable=import-outside-toplevel
    import verdictlab  # pylint: disable=import-outside-toplevel
    if not shutil.which("cc"):
        pytest.skip("needs cc")
    driver = tmp_path / "driver"
    other = tmp_path / "compat"
    verdictlab.compile_libcuda(str(driver / "libcuda.so.580.159.04"), 100)
    verdictlab.compile_libcuda(str(other / "libcuda.so.590.1"), 100)
    os.symlink("libcuda.so.580.159.04", str(driver / "libcuda.so.1"))
    os.symlink("libcuda.so.590.1", str(other / "libcuda.so.1"))
    return driver, other


def _loader(edits, inventory):
    b = _builder()
    points_to = _runtime_compare.loader_check(b, edits, inventory)
    return [c for c in b.checks if c["id"] == "runtime.loader.libcuda"], points_to


def _mount(path):
    return {"mounts": [{"hostPath": "/usr/local/nvidia/lib64/libcuda.so.580.159.04", "containerPath": str(path),
                        "options": ["ro", "bind"]}]}


def test_loader_resolves_the_mounted_driver_library(libs):
    driver, other = libs
    # mounted as the versioned file (nvidia-ctk style, libcuda.so.1 a symlink to it): /proc/self/maps names that file
    checks, points_to = _loader(_mount(driver / "libcuda.so.580.159.04"), _probe_inventory("%s:%s" % (driver, other)))
    assert [c["status"] for c in checks] == [PASS] and points_to is None
    assert checks[0]["observed"].startswith("resolved to %s/libcuda.so.580.159.04; LD_LIBRARY_PATH" % driver)


def test_loader_another_version_first_fails_with_the_paths(libs):
    driver, other = libs
    edits = dict(_mount(driver / "libcuda.so.580.159.04"), env=["LD_LIBRARY_PATH=%s" % other])
    checks, points_to = _loader(edits, _probe_inventory("%s:%s" % (other, driver)))
    assert [c["status"] for c in checks] == [FAIL]
    observed = checks[0]["observed"]
    assert observed.startswith("another file than the mounted driver library resolved first: %s/libcuda.so.590.1;"
                               % other)
    assert "LD_LIBRARY_PATH %s:%s" % (other, driver) in observed
    assert points_to == "cdi"  # the spec's own env put that directory first
    _checks, points_to = _loader(_mount(driver / "libcuda.so.580.159.04"), _probe_inventory("%s:%s" % (other, driver)))
    assert points_to == "image"  # not the spec's doing: the image's environment (issue 18 item 11)


def test_loader_not_finding_the_mounted_file_fails(libs, tmp_path):
    checks, _points_to = _loader(_mount(tmp_path / "elsewhere" / "libcuda.so.1"), _probe_inventory(str(tmp_path / "none")))
    assert [c["status"] for c in checks] == [FAIL]
    assert checks[0]["observed"].startswith("not resolved to the mounted file; the loader said: libcuda.so.1: cannot open "
                                            "shared object file")


def test_loader_found_the_mounted_file_that_dlopen_refused_passes(tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "libcuda.so.1").write_text("not an ELF file\n")
    checks, _points_to = _loader(_mount(lib / "libcuda.so.1"), _probe_inventory(str(lib)))
    assert [c["status"] for c in checks] == [PASS] and "dlopen refused it" in checks[0]["observed"]


def test_loader_without_a_libcuda_mount_or_inventory_is_not_run(libs):
    driver, _other = libs
    checks, _points_to = _loader({"mounts": []}, _probe_inventory(str(driver)))
    assert [c["status"] for c in checks] == [NOT_RUN] and "the spec mounts no libcuda" in checks[0]["observed"]
    checks, _points_to = _loader(_mount(driver / "libcuda.so.1"), {"nodes": {}})
    assert [c["status"] for c in checks] == [NOT_RUN]
    inventory = _probe_inventory(str(driver))
    inventory["libraries"]["libcuda.so.1"].pop("path")  # a loaded library whose file the maps did not name
    checks, _points_to = _loader(_mount(driver / "libcuda.so.580.159.04"), inventory)
    assert [c["status"] for c in checks] == [NOT_RUN] and "not found in /proc/self/maps" in checks[0]["observed"]


def test_edits_compared_check():
    b = _builder()
    _runtime_compare.compare_env(b, ["A=1"], {"A": "1"})
    _runtime_compare.edits_compared_check(b)
    assert (b.checks[-1]["status"], b.checks[-1]["observed"]) == (PASS, "1 compared")
    b = _builder()
    _runtime_compare.edits_compared_check(b)
    assert b.checks[-1]["status"] == WARN and b.build()["status"] == WARN


# issue 19.8: values that are not fully qualified CDI names, each of which podman's --device would read as something
# else (a host device mapped in, an option, a second device), or that the CDI library refuses to parse
HOSTILE_DEVICES = [
    "/tmp/x:/dev/y=z", "/dev/sda", "/dev/sda:/dev/xvda:rwm", "/dev/nvidia0", "--privileged", "-v=/:/host",
    "nvidia.com/gpu=0 --privileged", "nvidia.com/gpu=0\n", "nvidia.com/gpu=0\x00", "nvidia.com/gpu=", "nvidia.com/=0",
    "/gpu=0", "nvidia.com/gpu", "nvidia.com/gpu=a=b", "nvidia.com/gpu/x=0", "1vendor.com/gpu=0", "nvidia.com/gpu-=0",
    "nvidia.com/gpu=-0", "nvidia.com/gpu=0:", "nvidia.com/gpu=a/b", "nvidia.com/gpu=0,nvidia.com/gpu=1",
    "nvidia.com/gpu=é", "", " nvidia.com/gpu=0", "vendor.com/class=../../dev/sda", 0, None, ["nvidia.com/gpu=0"],
]
GOOD_DEVICES = ["nvidia.com/gpu=0", "nvidia.com/gpu=all", "gpuprobe.local/gpu-r1=0", "k8s.gpu.nvidia.com/claim=a_b.c:d-1",
                "a/b=c", "nvidia.com/mig=GPU-0b4e7f2c-1:3", "x/y=MIG-1"]


@pytest.mark.parametrize("device", HOSTILE_DEVICES)
def test_only_qualified_cdi_names_reach_the_runtimes_argv(device):
    engine = {"name": "podman", "path": "/usr/bin/podman"}
    with pytest.raises(ValueError, match="fully qualified CDI device name"):
        _runtime_adapters.build_argv(engine, "gpuprobe-r1-abc", "r1", "img:1", ["nvidia.com/gpu=0", device], "/tmp/p.py", {})
    with pytest.raises(ValueError, match="fully qualified CDI device name"):
        _runtime_layer.record({"run_id": "r1", "image": "img:1", "cdi_devices": [device], "runtime": "podman"})


@pytest.mark.parametrize("device", GOOD_DEVICES)
def test_qualified_cdi_names_are_passed_as_they_are(device):
    argv = _runtime_adapters.build_argv({"name": "podman", "path": "/usr/bin/podman"}, "gpuprobe-r1-abc", "r1", "img:1", [device],
                                        "/tmp/p.py", {})
    assert argv[argv.index("--device") + 1] == device


@pytest.mark.parametrize("device", [d for d in HOSTILE_DEVICES + GOOD_DEVICES if isinstance(d, str)])
def test_the_runtimes_name_rule_is_the_cdi_layers(device):
    """The runtime layer's compact rule gives the same answer as the cdi layer's port of pkg/parser."""
    from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.names import parse_qualified_name
    try:
        parse_qualified_name(device)
        cdi_ok = True
    except ValueError:
        cdi_ok = False
    assert bool(_options.QUALIFIED_DEVICE_RE.fullmatch(device)) is cdi_ok


@pytest.mark.parametrize("image", ["--privileged", "-v", "", "img:1 --privileged", "img\n", None, 5])
def test_an_image_that_is_not_an_image_reference_never_reaches_the_argv(image):
    with pytest.raises(ValueError, match="is not an image reference"):
        _runtime_adapters.build_argv({"name": "podman", "path": "/usr/bin/podman"}, "gpuprobe-r1-abc", "r1", image,
                                     ["nvidia.com/gpu=0"], "/tmp/p.py", {})


@pytest.mark.parametrize("spelling,observed,status", [
    ("c", {"type": "c", "major": 195, "minor": 0}, "PASS"),
    ("u", {"type": "c", "major": 195, "minor": 0}, "PASS"),    # issue 18.6: unbuffered char device = c
    ("", {"type": "c", "major": 195, "minor": 0}, "PASS"),     # the host node's type (none on this machine: c)
    (None, {"type": "c", "major": 195, "minor": 0}, "PASS"),
    ("b", {"type": "b", "major": 195, "minor": 0}, "PASS"),
    ("u", {"type": "b", "major": 195, "minor": 0}, "FAIL"),
    ("b", {"type": "c", "major": 195, "minor": 0}, "FAIL"),
    ("u", {"type": "c", "major": 195, "minor": 1}, "FAIL"),
    ("p", {"type": "file"}, "NOT_RUN"),                          # the probe cannot tell a FIFO from a file
    ("p", {"type": "c", "major": 195, "minor": 0}, "FAIL"),
])
def test_every_node_type_spelling_the_cdi_library_accepts(spelling, observed, status):
    b = LayerBuilder("runtime", _runtime_catalogue.CHECKS)
    node = dict(observed, present=True, open="OK", mode="0666")
    entry = {"path": "/dev/gpuprobe-test-node", "type": spelling, "major": 195, "minor": 0}
    _runtime_compare.compare_nodes(b, [entry], {"/dev/gpuprobe-test-node": node})
    assert [c["status"] for c in b.checks if c["id"] == "runtime.device_node.type"] == [status]


# issues 18.5/19.5: the runtime resolves a spec's paths in the container (runc: cleaned, and the rootfs's own symlinks
# followed; seen with podman 4.3.1 + runc 1.1.5 in mountinfo: /lib64/x -> /usr/lib64/x, /opt/y/ -> /opt/y,
# /opt/a/../x -> /opt/x, //opt/./w -> /opt/w, /opt/link/z -> /opt/real/z). (spec path, probe's realpath or None,
# where runc put it)
MERGED_USR = {"/lib64": "/usr/lib64", "/lib": "/usr/lib", "/opt/link": "/opt/real"}
SPEC_PATHS = [
    ("/lib64/x", "/usr/lib64/x", "/usr/lib64/x"),
    ("/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib/x86_64-linux-gnu/libcuda.so.1"),
    ("/opt/link/z", "/opt/real/z", "/opt/real/z"),
    ("/opt/y/", "/opt/y", "/opt/y"),
    ("/opt/a/../x", "/opt/x", "/opt/x"),
    ("//opt/./w", "/opt/w", "/opt/w"),
    ("/opt/y/", None, "/opt/y"),          # no resolution from the probe: cleaned as runc cleans
    ("/opt/a/../x", None, "/opt/x"),
    ("/usr/lib/x", "/usr/lib/x", "/usr/lib/x"),
]


@pytest.mark.parametrize("spec_path,real,where", SPEC_PATHS)
def test_one_path_rule_for_mounts(spec_path, real, where):
    b = _builder()
    resolved = {spec_path: real}
    mounts = [{"mount_point": where, "root": "/host/lib/x", "fstype": "ext4", "options": ["ro"]}]
    _runtime_compare.compare_mounts(b, [{"hostPath": "/nonexistent/lib/x", "containerPath": spec_path, "options": ["ro", "bind"]}],
                                    mounts, resolved)
    assert [(c["id"], c["status"]) for c in b.checks] == [("runtime.mount.present", PASS), ("runtime.mount.source", PASS)]
    # a mount that is really missing still FAILs, whatever the spelling
    b = _builder()
    _runtime_compare.compare_mounts(b, [{"hostPath": "/h/x", "containerPath": spec_path, "options": ["ro", "bind"]}],
                                    [{"mount_point": "/elsewhere", "root": "/h/x", "fstype": "ext4", "options": ["ro"]}], resolved)
    assert [c["status"] for c in b.checks] == [FAIL]


@pytest.mark.parametrize("spec_path,real,where", SPEC_PATHS)
def test_one_path_rule_for_device_nodes(spec_path, real, where):
    b = _builder()
    _runtime_compare.compare_nodes(b, [{"path": spec_path, "type": "c", "major": 195, "minor": 0}], {where: _node()}, {spec_path: real})
    assert [(c["id"], c["status"]) for c in b.checks] == [
        ("runtime.device_node.present", PASS), ("runtime.device_node.type", PASS), ("runtime.device_node.open", PASS)]
    b = _builder()
    _runtime_compare.compare_nodes(b, [{"path": spec_path, "type": "c", "major": 195, "minor": 0}], {"/elsewhere": _node()},
                                   {spec_path: real})
    assert [c["status"] for c in b.checks] == [FAIL]


@pytest.mark.parametrize("spec_path,real,where", [p for p in SPEC_PATHS if p[1]])
def test_one_path_rule_for_the_loader(spec_path, real, where):
    """The mapped file (/proc/self/maps: a real path) is the mounted one when the mount point resolves to it."""
    spec_path = posixpath.join(posixpath.dirname(spec_path), "libcuda.so.1")
    where = posixpath.join(posixpath.dirname(where), "libcuda.so.1")
    real = posixpath.join(posixpath.dirname(real), "libcuda.so.1")
    edits = {"mounts": [{"hostPath": "/h/libcuda.so.1", "containerPath": spec_path, "options": ["ro", "bind"]}]}
    inventory = {"libraries": {"libcuda.so.1": {"ok": True, "path": where, "realpath": where}},
                 "mounts": [{"mount_point": where, "root": "/h/libcuda.so.1"}], "resolved_paths": {spec_path: real}}
    checks, _points_to = _loader(edits, inventory)
    assert [c["status"] for c in checks] == [PASS], checks
    inventory["libraries"]["libcuda.so.1"] = {"ok": True, "path": "/image/libcuda.so.1", "realpath": "/image/libcuda.so.1"}
    checks, _points_to = _loader(edits, inventory)
    assert [c["status"] for c in checks] == [FAIL]


def test_the_probe_config_asks_for_every_spec_path_and_the_probe_resolves_them(tmp_path):
    from ansible_collections.gpuprobe.layers.plugins.module_utils._probe import script as _probe  # pylint: disable=import-outside-toplevel
    edits = {"deviceNodes": [{"path": "/dev/x/"}], "mounts": [{"containerPath": "/lib64/x"}],
             "env": ["LD_LIBRARY_PATH=/lib64:/opt/l", "A=1"]}
    config = _runtime_layer._probe_config(edits, False)  # pylint: disable=protected-access
    assert config["nodes"] == ["/dev/x/", "/dev/x"]
    assert config["resolve_paths"] == ["/dev/x/", "/lib64", "/lib64/x", "/opt/l"]
    (tmp_path / "usr" / "lib64").mkdir(parents=True)
    os.symlink("usr/lib64", str(tmp_path / "lib64"))
    paths = [str(tmp_path / "lib64" / "x"), str(tmp_path / "a") + "/../lib64/", "relative", 5]
    assert _probe.resolve_paths(paths) == {paths[0]: str(tmp_path / "usr" / "lib64" / "x"),
                                           paths[1]: str(tmp_path / "usr" / "lib64")}


def _failing_podman(tmp_path, monkeypatch, say=""):
    """A podman on PATH that records its arguments in tmp_path/calls, says ``say`` and exits 125; its path."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "podman").write_text('#!/bin/sh\necho "$*" >> "%s/calls"\n%sexit 125\n' % (tmp_path, say))
    (bindir / "podman").chmod(0o755)
    monkeypatch.setenv("PATH", str(bindir))
    return str(bindir / "podman")


def test_a_podman_the_inspect_stage_read_the_version_of_is_detected_in_full_before_a_container(tmp_path, monkeypatch):
    # the inspect stage's podman (usable None: podman --version only) is asked podman info here; what the cdi layer
    # judged of it (why it was chosen, its CDI configuration) stays with it; a podman info that fails is NOT_RUN
    podman = _failing_podman(tmp_path, monkeypatch, 'echo "Error: no storage" >&2\n')
    chosen = {"name": "podman", "path": podman, "usable": None, "version": "4.3.1",
              "reason": "podman info not run in the inspect stage", "selected_because": "no kubelet; podman 4.3.1 is installed",
              "cdi_config": {"engine": "podman", "enabled": True}}
    record, probe = _runtime_layer.record({"run_id": "r1", "image": "i", "cdi_devices": ["k/c=0"], "runtime": "podman",
                                           "engine": chosen})
    assert (tmp_path / "calls").read_text().splitlines() == ["info --format {{.Version.Version}}|{{.Host.OCIRuntime.Name}}|"
                                                             "{{.Host.OCIRuntime.Version}}|{{.Host.CgroupsVersion}}"]
    assert record["status"] == "NOT_RUN" and record["reason"] == "podman info failed: Error: no storage" and probe is None
    assert record["evidence"]["engine"]["selected_because"] == "no kubelet; podman 4.3.1 is installed"


def test_an_engine_the_inspect_stage_detected_in_full_is_never_asked_again_usable_or_not(tmp_path, monkeypatch):
    # node_verify's inspect stage ran podman info beside the host layer: a podman info that failed or hung there is
    # not run a second time before the container (a hung one would cost its timeout twice); the record says why
    chosen = {"name": "podman", "path": _failing_podman(tmp_path, monkeypatch), "usable": False, "version": None,
              "reason": "podman info failed: timeout after 30s", "selected_because": "no kubelet; podman is installed"}
    record, probe = _runtime_layer.record({"run_id": "r1", "image": "i", "cdi_devices": ["k/c=0"], "runtime": "podman",
                                           "engine": chosen})
    assert not (tmp_path / "calls").exists()
    assert record["status"] == "NOT_RUN" and record["reason"] == "podman info failed: timeout after 30s" and probe is None
