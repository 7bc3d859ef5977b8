"""Runtime and compute layers against real podman + runc, a locally built probe image, synthetic char
devices (mknod) and synthetic library files injected through a REAL CDI spec in /var/run/cdi.

No GPU here: the full spec gives runtime PASS, and compute then FAILs honestly at dlopen (the injected
libcuda.so.1 is not an ELF file), never NOT_RUN by pretence and never PASS.
"""
import json
import os
import shutil
import subprocess
import uuid

import pytest

import hostfixture  # tests/conftest.py puts tests/unit/fixtures/host on sys.path

from ansible_collections.gpuprobe.layers.plugins.module_utils._compute import layer as _compute_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import cleanup as _runtime_cleanup
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import layer as _runtime_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import spec as _cdi_spec
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import validate_record
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.verdict import node_verdict

yaml = pytest.importorskip("yaml")

pytestmark = pytest.mark.integration

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
IMAGE = os.environ.get("GPUPROBE_PROBE_IMAGE", "localhost/gpuprobe-probe:local")
SPEC_DIR = "/var/run/cdi"
LIB_IN_CONTAINER = "/usr/lib/x86_64-linux-gnu/libcuda.so.1"


def _podman_env():
    env = dict(os.environ)
    conf = os.environ.get("GPUPROBE_TEST_CONTAINERS_CONF")
    if conf:
        env["CONTAINERS_CONF"] = conf
    return env


@pytest.fixture(scope="module", autouse=True)
def podman_env():
    if os.geteuid() != 0 or not shutil.which("podman") or not shutil.which("runc"):
        pytest.skip("needs root, podman and runc")
    saved = os.environ.get("CONTAINERS_CONF")
    os.environ.update(_podman_env())
    yield
    if saved is None:
        os.environ.pop("CONTAINERS_CONF", None)
    else:
        os.environ["CONTAINERS_CONF"] = saved


@pytest.fixture(scope="session")
def probe_image():
    """Build the probe image once per session when it is absent (no registry involved)."""
    env = _podman_env()
    if subprocess.run(["podman", "image", "exists", IMAGE], env=env, check=False).returncode != 0:
        subprocess.run(["bash", os.path.join(ROOT, "scripts", "build-probe-image.sh"), IMAGE], env=env, check=True,
                       timeout=300)
    return IMAGE


class Lab(object):
    """A synthetic GPU: char devices, a fake libcuda, and a CDI spec for them under /var/run/cdi."""

    def __init__(self, base):
        self.run_id = "t" + uuid.uuid4().hex[:10]
        self.base = str(base)
        self.dev = os.path.join(self.base, "dev")
        self.lib = os.path.join(self.base, "lib")
        os.makedirs(self.dev)
        os.makedirs(self.lib)
        self.spec_path = os.path.join(SPEC_DIR, "gpuprobe-%s.yaml" % self.run_id)
        # the run's own kind (as cdi_spec gives every run): other runs' specs never meet this one
        self.kind = _cdi_spec.run_kind(self.run_id)
        self.device_name = self.run_id
        self.device = "%s=%s" % (self.kind, self.device_name)

    def node(self, name, major, minor, **extra):
        host = os.path.join(self.dev, name)
        if not os.path.exists(host):
            hostfixture.mknod(host, major, minor)
        entry = {"path": "/dev/" + name, "hostPath": host, "type": "c", "major": major, "minor": minor}
        entry.update(extra)
        return entry

    def library(self, name="libcuda.so.1", text="not an ELF file\n"):
        path = os.path.join(self.lib, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def hanging_library(self, seconds=300):
        """A libcuda.so.1 whose load never returns in time (a constructor that sleeps), as a stuck driver would: the
        probe hangs with nothing from the container's environment asking it to (no test hook exists there)."""
        cc = shutil.which("cc") or shutil.which("gcc")
        if not cc:
            pytest.skip("needs a C compiler for the hanging libcuda")
        path = os.path.join(self.lib, "libcuda-hangs.so.1")
        with open(path + ".c", "w") as f:
            f.write("#include <unistd.h>\n__attribute__((constructor)) static void hang(void) { sleep(%d); }\n" % seconds)
        subprocess.run([cc, "-shared", "-fPIC", "-o", path, path + ".c"], check=True, capture_output=True)
        return path

    def hanging_edits(self):
        edits = self.full_edits()
        edits["mounts"][0]["hostPath"] = self.hanging_library()
        return edits

    def full_edits(self):
        return {
            "env": ["GPUPROBE_TEST=1"],
            "deviceNodes": [self.node("nvidia0", 1, 3), self.node("nvidiactl", 1, 5)],
            "mounts": [{"hostPath": self.library(), "containerPath": LIB_IN_CONTAINER,
                        "options": ["ro", "nosuid", "nodev", "bind"]}],
        }

    def absent_mount_edits(self):
        """The full edits plus a mount whose hostPath does not exist (the container never starts)."""
        edits = self.full_edits()
        edits["mounts"].append({"hostPath": os.path.join(self.lib, "absent.so.1"),
                                "containerPath": "/usr/lib/x86_64-linux-gnu/libnvidia-ptxjitcompiler.so.1",
                                "options": ["ro", "nosuid", "nodev", "bind"]})
        return edits

    def write_spec(self, edits):
        spec = {"cdiVersion": "0.5.0", "kind": self.kind,
                "devices": [{"name": self.device_name, "containerEdits": {"deviceNodes": edits.get("deviceNodes") or []}}],
                "containerEdits": dict((k, v) for k, v in edits.items() if k != "deviceNodes" and v)}
        # what makes a spec ours for probe_cleanup: our kind, its file name, and the run id in its env
        spec["containerEdits"]["env"] = list(spec["containerEdits"].get("env") or []) + ["GPUPROBE_RUN_ID=%s" % self.run_id]
        os.makedirs(SPEC_DIR, exist_ok=True)
        with open(self.spec_path, "w") as f:
            yaml.safe_dump(spec, f)

    def cleanup(self):
        if os.path.exists(self.spec_path):
            os.unlink(self.spec_path)
        subprocess.run(["podman", "rm", "-f", "-i"] + self.leftovers(), env=_podman_env(), check=False,
                       capture_output=True)

    def leftovers(self):
        r = subprocess.run(["podman", "ps", "-a", "--filter", "label=gpuprobe.run=%s" % self.run_id, "--format",
                            "{{.Names}}"], env=_podman_env(), capture_output=True, text=True, check=False)
        return r.stdout.split()

    def run(self, expected, compute=True, **extra):
        params = {"run_id": self.run_id, "image": IMAGE, "cdi_devices": [self.device], "expected_edits": expected,
                  "compute": compute, "timeout": 60, "runtime": "podman"}
        params.update(extra)
        record, probe = _runtime_layer.record(params)
        assert validate_record(record) == []
        assert self.leftovers() == [], "the probe container was not removed"
        return record, probe


@pytest.fixture
def lab(tmp_path, probe_image):
    lab = Lab(tmp_path)
    yield lab
    lab.cleanup()


def _checks(record, check_id, status=None):
    return [c for c in record["checks"] if c["id"] == check_id and (status is None or c["status"] == status)]


# host NVML evidence of compute processes: without it, compute does not run ("cannot tell whether the GPU is in use")
GPU_A = "GPU-0a0a0a0a-1111-2222-3333-444444444444"
GPU_B = "GPU-0b0b0b0b-1111-2222-3333-444444444444"


def idle_host(*uuids):
    gpus = [{"index": i, "uuid": u, "compute_processes": []} for i, u in enumerate(uuids or (GPU_A,))]
    return {"evidence": {"nvml": {"ok": True, "gpus": gpus}}}


def expected_gpus(*uuids):
    return [{"uuid": u, "index": i, "minor": i, "name": "NVIDIA H200", "mig_uuid": None} for i, u in enumerate(uuids)]


def test_full_spec_runtime_pass_and_compute_fails_at_dlopen(lab):
    edits = lab.full_edits()
    lab.write_spec(edits)
    record, probe = lab.run(edits, host=idle_host())
    assert record["status"] == "PASS", record["reason"]
    assert len(_checks(record, "runtime.device_node.open", "PASS")) == 2
    assert _checks(record, "runtime.mount.present", "PASS")[0]["subject"] == LIB_IN_CONTAINER
    assert _checks(record, "runtime.env.value", "PASS")[0]["observed"] == "1"
    assert record["versions"]["runtime"].startswith("podman ")
    assert probe["executed"] and probe["cdi_devices"] == [lab.device]
    lib = probe["inventory"]["libraries"]["libcuda.so.1"]
    assert not lib["ok"] and LIB_IN_CONTAINER in lib["error"]  # the loader found OUR file and refused it

    compute = _compute_layer.record(probe, record, host_record=idle_host(), host_control=True, timeout=30,
                                    expected_gpus=expected_gpus(GPU_A))
    assert validate_record(compute) == []
    assert compute["status"] == "FAIL"
    # the probe could not list devices: the expected GPU's row FAILs with the same signature, not as 'missing'
    assert [(r["uuid"], r["status"], r["signature"], r["seen_in_container"]) for r in compute["evidence"]["gpus"]] == [
        (GPU_A, "FAIL", "compute.dlopen.libcuda", False)]
    assert compute["evidence"]["container"]["cdi_devices"] == [lab.device]
    assert compute["signature"] == "compute.dlopen.libcuda"
    assert compute["evidence"]["container"]["executed"] is True
    # no libcuda on this host either: both FAIL -> the verdict points at the host
    assert compute["evidence"]["host_control"]["status"] == "FAIL"
    assert compute["points_to"] == "host"
    verdict = node_verdict({"runtime": record, "compute": compute})
    assert verdict["verdict"] == "FAILED_AT_COMPUTE" and verdict["signature"] == "compute.dlopen.libcuda"


def test_expected_mount_missing_from_spec_fails_runtime_mount(lab):
    edits = lab.full_edits()
    spec_edits = dict(edits, mounts=[])
    lab.write_spec(spec_edits)
    record, _probe = lab.run(edits, compute=False)
    assert record["status"] == "FAIL"
    assert record["signature"] == "runtime.mount.present"
    failed = _checks(record, "runtime.mount.present", "FAIL")[0]
    assert failed["subject"] == LIB_IN_CONTAINER and failed["observed"] == "not a mount point in the container"


def test_node_missing_from_spec_fails_runtime_device_node_present(lab):
    edits = lab.full_edits()
    lab.write_spec(dict(edits, deviceNodes=edits["deviceNodes"][:1]))
    record, _probe = lab.run(edits, compute=False)
    assert record["status"] == "FAIL"
    assert record["signature"] == "runtime.device_node.present"
    assert _checks(record, "runtime.device_node.present", "FAIL")[0]["subject"] == "/dev/nvidiactl"


def test_cgroup_permissions_r_gives_open_eperm(lab):
    edits = lab.full_edits()
    # 195:0 is not in the runtime's default device allow-list: the spec's cgroup rule alone decides
    edits["deviceNodes"].append(lab.node("nvidia1", 195, 0, permissions="r"))
    lab.write_spec(edits)
    record, _probe = lab.run(edits, compute=False)
    assert record["status"] == "FAIL"
    assert record["signature"] == "runtime.device_node.open.EPERM"
    assert record["points_to"] == "runtime"
    failed = _checks(record, "runtime.device_node.open", "FAIL")
    assert [c["subject"] for c in failed] == ["/dev/nvidia1"]
    assert failed[0]["observed"].startswith("EPERM")
    assert _checks(record, "runtime.device_node.present", "PASS")  # visible, yet not openable


def test_file_mode_as_non_root_gives_eacces_or_mode_warning(lab):
    edits = lab.full_edits()
    edits["deviceNodes"][0]["fileMode"] = 0
    lab.write_spec(edits)
    record, _probe = lab.run(edits, compute=False, user="1000:1000")
    mode = _checks(record, "runtime.device_node.mode")[0]
    if mode["status"] == "PASS":  # this runtime applied fileMode 0000: a non-root open is refused by the mode,
        # as the spec asks: a WARN, not a runtime failure (on the H200 CUDA still worked in this state)
        opens = _checks(record, "runtime.device_node.open", "WARN")
        assert opens and "EACCES" in opens[0]["observed"] and "uid 1000" in opens[0]["observed"]
        assert record["status"] == "WARN"
    else:  # a runtime that left the mode alone -> WARN on the mode, open still works
        assert mode["status"] == "WARN" and record["status"] == "WARN"


def test_env_value_mismatch_fails(lab):
    edits = lab.full_edits()
    lab.write_spec(edits)
    record, _probe = lab.run(dict(edits, env=["GPUPROBE_TEST=2"]), compute=False)
    assert record["signature"] == "runtime.env.value"
    failed = _checks(record, "runtime.env.value", "FAIL")[0]
    assert (failed["expected"], failed["observed"]) == ("2", "1")


def test_missing_host_path_container_never_starts(lab):
    edits = lab.absent_mount_edits()
    lab.write_spec(edits)
    record, probe = lab.run(edits)
    assert record["status"] == "FAIL"
    assert record["signature"] == "runtime.start.hostpath_missing"
    assert record["points_to"] == "cdi"
    assert "absent.so.1" in _checks(record, "runtime.container.started", "FAIL")[0]["observed"]
    assert probe is None
    compute = _compute_layer.record(probe, record, host_control=False)
    assert compute["status"] == "NOT_RUN"
    assert "runtime.start.hostpath_missing" in compute["reason"]
    assert node_verdict({"runtime": record, "compute": compute})["verdict"] == "FAILED_AT_RUNTIME"


def test_unresolvable_device(lab):
    record, probe = lab.run({}, compute=False)  # no spec written at all
    assert record["signature"] == "runtime.start.cdi_unresolvable" and probe is None


def test_missing_image(lab):
    edits = lab.full_edits()
    lab.write_spec(edits)
    record, _probe = lab.run(edits, compute=False, image="localhost/gpuprobe-absent:none")
    assert record["signature"] == "runtime.start.image_missing"


def test_timeout_kills_and_removes_the_container(lab):
    edits = lab.hanging_edits()  # the probe hangs loading libcuda (as a stuck driver would)
    lab.write_spec(edits)
    record, _probe = lab.run(edits, compute=False, timeout=3)
    assert record["status"] == "FAIL"
    assert record["signature"] in ("runtime.start.timeout", "runtime.probe.inventory")
    assert record["evidence"]["container"]["timed_out"] is True


def _probe_config(record):
    return json.loads(record["evidence"]["container"]["argv"][-1])


def test_busy_gpu_is_passed_to_the_probe_to_skip_and_its_row_is_not_run(lab):
    edits = lab.full_edits()
    lab.write_spec(edits)
    host = idle_host(GPU_A, GPU_B)
    host["evidence"]["nvml"]["gpus"][1]["compute_processes"] = [{"pid": 4242, "used_gpu_memory_bytes": 1}]
    record, probe = lab.run(edits, host=host)
    assert record["status"] == "PASS"
    assert _probe_config(record)["idle_uuids"] == [GPU_A]  # the idle GPU alone: the busy one never touched
    assert probe["compute_requested"] and probe["compute_skipped"] is None
    compute = _compute_layer.record(probe, record, host_record=host, host_control=False,
                                    expected_gpus=expected_gpus(GPU_A, GPU_B))
    assert validate_record(compute) == []
    rows = dict((r["uuid"], r) for r in compute["evidence"]["gpus"])
    assert (rows[GPU_B]["status"], rows[GPU_B]["reason"]) == ("NOT_RUN", "GPU in use, not preempting: pid 4242")
    assert rows[GPU_A]["status"] == "FAIL"  # no libcuda here: the idle GPU is tried and fails honestly
    assert compute["status"] == "FAIL" and compute["signature"] == "compute.dlopen.libcuda"


def test_unknown_busy_state_skips_compute_unless_allowed(lab):
    edits = lab.full_edits()
    lab.write_spec(edits)
    record, probe = lab.run(edits)  # no host record
    assert record["status"] == "PASS"
    assert probe["steps"] == [] and probe["compute_skipped"].startswith("cannot tell whether the GPU is in use")
    compute = _compute_layer.record(probe, record, host_record=None, host_control=True,
                                    expected_gpus=expected_gpus(GPU_A))
    assert compute["status"] == "NOT_RUN" and compute["reason"].startswith("cannot tell whether the GPU is in use")
    assert compute["evidence"]["host_control"]["status"] == "NOT_RUN"
    assert [r["status"] for r in compute["evidence"]["gpus"]] == ["NOT_RUN"]
    record, probe = lab.run(edits, allow_busy_gpu=True)
    assert "skip_compute_reason" not in _probe_config(record)
    assert probe["steps"] and probe["steps"][0]["step"] == "dlopen"


def test_expected_gpu_missing_when_the_container_lists_none(lab, tmp_path):
    """A libcuda that loads and answers (a tiny C library built here) but lists no GPU: every expected GPU is
    reported missing from the container, with rows, and never PASS."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("needs a C compiler for the tiny libcuda")
    src = tmp_path / "cuda.c"
    src.write_text("int cuInit(unsigned f){return 0;}\nint cuDriverGetVersion(int*v){*v=12080;return 0;}\n"
                   "int cuDeviceGetCount(int*c){*c=0;return 0;}\n"
                   "int cuGetErrorName(int e,const char**s){*s=\"CUDA_ERROR_NO_DEVICE\";return 0;}\n")
    lib = os.path.join(lab.lib, "libcuda-none.so.1")
    subprocess.run([cc, "-shared", "-fPIC", "-o", lib, str(src)], check=True, capture_output=True)
    edits = lab.full_edits()
    edits["mounts"][0]["hostPath"] = lib
    lab.write_spec(edits)
    record, probe = lab.run(edits, host=idle_host(GPU_A))
    assert record["status"] == "PASS", record["reason"]
    assert probe["facts"]["devices"] == [] and probe["facts"]["cuda_driver_api"] == 12080
    compute = _compute_layer.record(probe, record, host_record=idle_host(GPU_A), host_control=False,
                                    expected_gpus=expected_gpus(GPU_A))
    assert validate_record(compute) == []
    assert compute["status"] == "FAIL"
    assert [(r["uuid"], r["status"], r["signature"]) for r in compute["evidence"]["gpus"]] == [
        (GPU_A, "FAIL", "compute.gpu.missing")]
    assert [c["status"] for c in compute["checks"] if c["id"] == "compute.gpu.seen"] == ["FAIL"]


def test_per_device_isolation_runs_one_compute_container_per_device(lab):
    edits = lab.full_edits()
    second = lab.node("nvidia1", 1, 7)
    spec = {"cdiVersion": "0.5.0", "kind": lab.kind,
            "devices": [{"name": lab.device_name, "containerEdits": {"deviceNodes": edits["deviceNodes"]}},
                        {"name": lab.device_name + "-b", "containerEdits": {"deviceNodes": [second]}}],
            "containerEdits": {"env": edits["env"], "mounts": edits["mounts"]}}
    os.makedirs(SPEC_DIR, exist_ok=True)
    with open(lab.spec_path, "w") as f:
        yaml.safe_dump(spec, f)
    devices = [lab.device, lab.device + "-b"]
    all_edits = dict(edits, deviceNodes=edits["deviceNodes"] + [second])
    record, probe = lab.run(all_edits, cdi_devices=devices, isolation="per_device", host=idle_host(GPU_A, GPU_B))
    assert record["status"] == "PASS", record["reason"]
    assert [c["device"] for c in record["evidence"]["isolation"]["containers"]] == devices
    assert len(probe["containers"]) == 2 and all(c["executed"] for c in probe["containers"])
    assert [c["cdi_devices"] for c in probe["containers"]] == [[d] for d in devices]
    names = [c["container_name"] for c in probe["containers"]]
    assert len(set(names + [record["evidence"]["container"]["name"]])) == 3  # three containers, all removed
    # each container ran a probe file of its own, each looked at again after its run (issue 42 item 4)
    unchanged = [c for c in record["checks"] if c["id"] == "runtime.probe.unchanged"]
    containers = [record["evidence"]["container"]["name"]] + names
    assert [(c["subject"], c["status"]) for c in unchanged] == [(n, "PASS") for n in containers]
    compute = _compute_layer.record(probe, record, host_record=idle_host(GPU_A, GPU_B), host_control=False,
                                    expected_gpus=expected_gpus(GPU_A, GPU_B))
    assert validate_record(compute) == []
    assert compute["status"] == "FAIL" and compute["signature"] == "compute.dlopen.libcuda"
    assert compute["evidence"]["container"]["cdi_devices"] == devices
    assert len(compute["evidence"]["containers"]) == 2
    assert [r["status"] for r in compute["evidence"]["gpus"]] == ["FAIL", "FAIL"]


def test_probe_cleanup_removes_labelled_containers_and_our_spec(lab):
    lab.write_spec(lab.full_edits())
    env = _podman_env()
    subprocess.run(["podman", "create", "--name", "gpuprobe-%s-left" % lab.run_id, "--label",
                    "gpuprobe.run=%s" % lab.run_id, IMAGE, "python3"], env=env, check=True, capture_output=True)
    assert lab.leftovers() == ["gpuprobe-%s-left" % lab.run_id]
    dry = _runtime_cleanup.cleanup(run_id=lab.run_id, runtime="podman", check_mode=True)
    assert dry["changed"] and lab.leftovers() and os.path.exists(lab.spec_path)
    result = _runtime_cleanup.cleanup(run_id=lab.run_id, runtime="podman")
    assert result["changed"] and result["errors"] == []
    assert result["containers"] == ["podman:gpuprobe-%s-left" % lab.run_id]
    assert result["specs"] == [lab.spec_path] and not os.path.exists(lab.spec_path)
    assert lab.leftovers() == []
    assert _runtime_cleanup.cleanup(run_id=lab.run_id, runtime="podman")["changed"] is False


def test_runtime_facts_module_main(lab, capsys):
    from ansible.module_utils.testing import patch_module_args
    from ansible_collections.gpuprobe.layers.plugins.modules import runtime_facts

    edits = lab.full_edits()
    lab.write_spec(edits)
    args = {"image": IMAGE, "run_id": lab.run_id, "cdi_devices": [lab.device], "expected_edits": edits,
            "runtime": "podman"}
    with patch_module_args(args):
        with pytest.raises(SystemExit):
            runtime_facts.main()
    out = json.loads(capsys.readouterr().out)
    assert out["changed"] is False
    assert out["ansible_facts"]["gpuprobe_runtime"]["status"] == "PASS"
    assert out["ansible_facts"]["gpuprobe_probe"]["executed"] is True
    with patch_module_args(dict(args, _ansible_check_mode=True)):
        with pytest.raises(SystemExit):
            runtime_facts.main()
    out = json.loads(capsys.readouterr().out)
    assert out["ansible_facts"]["gpuprobe_runtime"]["status"] == "NOT_RUN"
    assert out["ansible_facts"]["gpuprobe_runtime"]["reason"].startswith("check mode")
    assert out["ansible_facts"]["gpuprobe_probe"] is None


def test_cleanup_with_auto_skips_a_runtime_whose_daemon_is_down(tmp_path, monkeypatch):
    """runtime=auto: a docker CLI that cannot reach its daemon is reported as not_listed, not a failed cleanup;
    named explicitly, the same runtime must answer and its failure is an error."""
    fake = tmp_path / "docker"
    fake.write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock.' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (tmp_path, os.environ["PATH"]))
    monkeypatch.setenv("CONTAINERS_CONF", _podman_env()["CONTAINERS_CONF"])
    run_id = "cleanup-%s" % uuid.uuid4().hex[:8]
    out = _runtime_cleanup.cleanup(run_id=run_id, runtime="auto", specs=False)
    assert out["errors"] == []
    assert any("docker ps failed" in s and "Cannot connect" in s for s in out["not_listed"]), out
    out = _runtime_cleanup.cleanup(run_id=run_id, runtime="docker", specs=False)
    assert out["errors"] and "Cannot connect" in out["errors"][0]


MERGED_USR_IMAGE = "localhost/gpuprobe-probe-merged-usr:test"


@pytest.fixture(scope="session")
def merged_usr_image(probe_image, tmp_path_factory):
    """The probe image laid out as Fedora/RHEL images are (merged /usr): /lib64 -> usr/lib64, /lib -> usr/lib, plus a
    symlinked directory /opt/link -> real. Built from the probe image's own tree (podman export | podman import)."""
    env = _podman_env()
    root = tmp_path_factory.mktemp("merged-usr-rootfs")
    name = "gpuprobe-export-%s" % uuid.uuid4().hex[:8]
    subprocess.run(["podman", "create", "--name", name, probe_image], env=env, check=True, capture_output=True)
    try:
        exported = subprocess.run(["podman", "export", name], env=env, check=True, capture_output=True).stdout
    finally:
        subprocess.run(["podman", "rm", "-f", name], env=env, check=False, capture_output=True)
    subprocess.run(["tar", "-C", str(root), "-x"], input=exported, check=True)
    for top in ("lib", "lib64"):
        if os.path.isdir(str(root / top)) and not os.path.islink(str(root / top)):
            os.makedirs(str(root / "usr" / top), exist_ok=True)
            subprocess.run(["cp", "-a", "%s/." % (root / top), str(root / "usr" / top)], check=True)
            shutil.rmtree(str(root / top))
        os.symlink("usr/" + top, str(root / top))
    os.makedirs(str(root / "opt" / "real"))
    os.symlink("real", str(root / "opt" / "link"))
    os.chmod(str(root), 0o755)
    tar = subprocess.run(["tar", "-C", str(root), "-c", "."], check=True, capture_output=True).stdout
    subprocess.run(["podman", "import", "-q", "--change", 'CMD ["/usr/bin/python3"]', "-", MERGED_USR_IMAGE], input=tar,
                   env=env, check=True, capture_output=True)
    return MERGED_USR_IMAGE


# spec paths as a Fedora/RHEL nvidia-ctk writes them (/lib64) and spelt untidily; runc puts each where the container's
# own symlinks lead (mountinfo: /usr/lib64/..., /opt/real/z, /opt/y, /opt/x)
MESSY_MOUNTS = ["/lib64/libnvidia-ml.so.1", "/lib64/x", "/opt/y/", "/opt/a/../x", "/opt/link/z", "//opt/./w"]
MESSY_NODES = ["/dev/../dev/gpuprobe-a", "/dev/gpuprobe-b/", "/lib64/gpuprobe-c", "/opt/link/gpuprobe-d"]


def test_merged_usr_image_and_messy_spec_paths_pass_and_a_missing_mount_still_fails(lab, merged_usr_image):
    """issues 18.5/19.5: runtime.mount.present compared the literal containerPath with mountinfo, so a healthy node
    FAILed on a merged-/usr image (/lib64/x is mounted at /usr/lib64/x) and on /opt/y/ or /opt/a/../x."""
    host_file = lab.library("libnvidia-ml.so.1", "synthetic library\n")
    nodes = []
    for i, path in enumerate(MESSY_NODES):
        host = lab.node("messy%d" % i, 1, 3)["hostPath"]
        nodes.append({"path": path, "hostPath": host, "type": "c", "major": 1, "minor": 3})
    edits = {"deviceNodes": nodes,
             "mounts": [{"hostPath": host_file, "containerPath": p, "options": ["ro", "nosuid", "nodev", "bind"]}
                        for p in MESSY_MOUNTS]}
    lab.write_spec(edits)
    record, probe = lab.run(edits, compute=False, image=merged_usr_image)
    assert [c["status"] for c in _checks(record, "runtime.mount.present")] == ["PASS"] * len(MESSY_MOUNTS), record["checks"]
    assert [c["status"] for c in _checks(record, "runtime.mount.source")] == ["PASS"] * len(MESSY_MOUNTS)
    assert [c["status"] for c in _checks(record, "runtime.device_node.present")] == ["PASS"] * len(MESSY_NODES)
    assert [c["status"] for c in _checks(record, "runtime.device_node.type")] == ["PASS"] * len(MESSY_NODES)
    assert record["status"] == "PASS", record["reason"]
    resolved = probe["inventory"]["resolved_paths"]
    assert resolved["/lib64/x"] == "/usr/lib64/x" and resolved["/opt/link/z"] == "/opt/real/z"
    assert resolved["/opt/a/../x"] == "/opt/x" and resolved["/opt/y/"] == "/opt/y"
    points = set(m["mount_point"] for m in probe["inventory"]["mounts"])
    assert {"/usr/lib64/x", "/usr/lib64/libnvidia-ml.so.1", "/opt/real/z", "/opt/x", "/opt/y", "/opt/w"} <= points
    assert "/lib64/x" not in points  # what the old literal comparison looked for

    # a mount the runtime did not apply still FAILs, under every spelling
    missing = dict(edits, mounts=edits["mounts"] + [{"hostPath": host_file, "containerPath": "/lib64/absent/../gone",
                                                     "options": ["ro", "bind"]}])
    record, _probe = lab.run(missing, compute=False, image=merged_usr_image)
    failed = _checks(record, "runtime.mount.present", "FAIL")
    assert [c["subject"] for c in failed] == ["/lib64/absent/../gone"] and "/usr/lib64/gone" in failed[0]["observed"]
    assert record["status"] == "FAIL" and record["signature"] == "runtime.mount.present"
