"""The runtime path of a node's Pods, with a REAL containerd 1.7.24 (the engines lab's binary, scripts/engines.sh fetch
and stubs) started behind a layout's socket path in a private directory: nothing of the system's /run, /var/run or
/etc/containerd is touched. Each containerd here is this module's own (its config, root, state and socket under a
short temporary directory: a unix socket path has 108 bytes), killed at the end; it starts no container.

- kubeadm's endpoint spelling ``unix://<dir>/var/run/containerd/containerd.sock``, where ``<dir>/var/run`` links to
  ``<dir>/run`` and containerd listens at ``<dir>/run/containerd/containerd.sock`` (a node's /var/run -> /run), with
  ``enable_cdi = false`` (containerd 1.7's default): cdi.engine.config reads the running daemon's configuration (its
  CRI Status) and the file of the containerd serving that endpoint (found by the socket's identity), FAILs, the node
  gate blocks the probe and the node is FAILED_AT_CDI pointing at cdi, not runtime (issue 35 item 3: compared as
  strings the two spellings matched no containerd, cdi.engine.config was NOT_RUN and the node failed later at the
  runtime);
- the same socket found from the running system: a process named kubelet with kubeadm's flags (a stand-in: only its
  argv matters) is the running kubelet, the containerd process is found where it really listens (its open socket,
  /proc/net/unix) and by the socket's identity, the CRI Version call answers, and the sentence says all of it;
- a k3s node tree (tests/unit/fixtures/layouts/k3s) as a private root with TWO real containerds: k3s's at
  ``<root>/run/k3s/containerd/containerd.sock`` and the system's at ``<root>/run/containerd/containerd.sock``, told
  apart by their sandbox image (the CRI Status call's configuration): the selection asks k3s's, the one its kubelet
  uses, and says the other runs (issue 35 item 1).
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

import layoutfixture  # tests/conftest.py puts tests/unit/fixtures/layouts on sys.path

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.engine import describe, read_engine_config
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.layer import record as cdi_layer
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import PASS, LayerBuilder
from ansible_collections.gpuprobe.layers.plugins.module_utils._node.gate import gated, layer_gate
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import select as sel
from ansible_collections.gpuprobe.layers.plugins.module_utils._verdict.verdict import node_verdict

pytestmark = pytest.mark.integration

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENGINES = os.environ.get("GPUPROBE_ENGINES_DIR", os.path.join(ROOT, ".build", "engines"))
BIN = os.path.join(ENGINES, "containerd", "usr", "bin")
DESCRIPTOR = os.path.join(ENGINES, "cri", "api.desc")
DISABLED = ('"io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", '
            '"io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"')
CONFIG = """version = 2
root = "{d}/root"
state = "{d}/state"
disabled_plugins = [{disabled}]
[grpc]
  address = "{sock}"
[ttrpc]
  address = "{sock}.ttrpc"
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = "{d}/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{sandbox}"
  enable_cdi = {cdi}
  restrict_oom_score_adj = true
  disable_apparmor = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{d}/cni/bin"
    conf_dir = "{d}/cni/conf"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "native"
"""
DEVICE = "k.example.com/gpu=0"


class Lab(object):
    """This test's containerds and stand-in processes, under one short private directory."""

    def __init__(self):
        self.base = tempfile.mkdtemp(prefix="gpl-", dir="/tmp")   # short: a socket path has 108 bytes
        self.started = []

    def containerd(self, sock, sandbox="localhost/gpuprobe-pause:local", cdi=False):
        """A containerd 1.7.24 listening at ``sock`` (a path of this machine) with enable_cdi ``cdi``: (process, config)."""
        d = os.path.join(self.base, "c%d" % len(self.started))
        for sub in ("root", "state", "opt", "cni/bin", "cni/conf"):
            os.makedirs(os.path.join(d, sub))
        os.makedirs(os.path.dirname(sock), exist_ok=True)
        config = os.path.join(d, "config.toml")
        with open(config, "w") as fh:
            fh.write(CONFIG.format(d=d, sock=sock, sandbox=sandbox, cdi=str(cdi).lower(), disabled=DISABLED))
        log = os.path.join(d, "containerd.log")
        with open(log, "w") as out:
            proc = subprocess.Popen([os.path.join(BIN, "containerd"), "--config", config], stdout=out, stderr=out,
                                    env=dict(os.environ, PATH="%s:%s" % (BIN, os.environ.get("PATH", ""))), start_new_session=True)
        self.started.append(proc)
        for _attempt in range(400):
            if os.path.exists(sock) or proc.poll() is not None:
                break
            time.sleep(0.05)
        with open(log) as fh:
            assert os.path.exists(sock), fh.read()[-2000:]
        return proc, config

    def stand_in(self, argv0, *args):
        """A process whose argv is ``argv0 -c <sleep> args...`` (a kubelet: only its argv matters)."""
        proc = subprocess.Popen(["/bin/bash", "-c", 'exec -a "$0" "$1" -c "import time; time.sleep(300)" "${@:2}"', argv0,
                                 sys.executable] + list(args))
        self.started.append(proc)
        for _attempt in range(100):
            with open("/proc/%d/cmdline" % proc.pid, "rb") as fh:
                if fh.read().startswith(argv0.encode() + b"\0"):
                    break
            time.sleep(0.05)
        return proc

    def close(self):
        for proc in self.started:
            proc.kill()
            proc.wait()
        shutil.rmtree(self.base, ignore_errors=True)


@pytest.fixture()
def lab():
    if os.geteuid() != 0:
        pytest.skip("needs root (containerd)")
    if not os.path.isfile(os.path.join(BIN, "containerd")) or not os.path.isfile(DESCRIPTOR):
        pytest.skip("the lab engines are not fetched (bash scripts/engines.sh fetch && bash scripts/engines.sh stubs)")
    out = Lab()
    yield out
    out.close()


def _kubeadm_node(lab_):
    """<dir>/run/containerd/containerd.sock served by a real containerd with enable_cdi false, <dir>/var/run -> ../run:
    (kubeadm's endpoint spelling, the socket's real path, the containerd process, its config file)."""
    os.makedirs(os.path.join(lab_.base, "run"))
    os.makedirs(os.path.join(lab_.base, "var"))
    os.symlink("../run", os.path.join(lab_.base, "var", "run"))
    real = os.path.join(lab_.base, "run", "containerd", "containerd.sock")
    proc, config = lab_.containerd(real, cdi=False)
    return "unix://%s/var/run/containerd/containerd.sock" % lab_.base, real, proc, config


def test_kubeadm_var_run_endpoint_with_cdi_off_is_failed_at_cdi(lab, tmp_path):  # pylint: disable=redefined-outer-name
    endpoint, _real, _proc, config = _kubeadm_node(lab)
    [info] = sel.select_runtimes("containerd", endpoint=endpoint, descriptor=DESCRIPTOR)
    assert (info["name"], info["version"], info["usable"]) == ("containerd", "1.7.24~ds1", True), info
    engine = describe(info)
    engine["cdi_config"] = read_engine_config(engine)
    # the running daemon's own configuration (its CRI Status) says CDI is off, and the file of the containerd serving
    # kubeadm's /var/run endpoint (found by the socket's identity, read with the real config dump) agrees
    cfg = engine["cdi_config"]
    assert (cfg["enabled"], cfg["source"]) == (False, "CRI Status (verbose) at %s" % endpoint), cfg
    assert (cfg["file"]["enabled"], cfg["file"]["source"], cfg["disagreements"]) == (
        False, "%s/containerd --config %s config dump" % (os.path.realpath(BIN), config), []), cfg
    spec_dir = tmp_path / "cdi"
    spec_dir.mkdir()
    (spec_dir / "gpu.yaml").write_text('cdiVersion: "0.5.0"\nkind: "k.example.com/gpu"\ndevices:\n- name: "0"\n'
                                       '  containerEdits:\n    env: ["X=1"]\n')
    cdi = cdi_layer(spec_dirs=[str(spec_dir)], discover_runtime_dirs_=False, devices=[DEVICE], kinds=["k.example.com/gpu"],
                    engines=[engine])
    [check] = [c for c in cdi["checks"] if c["id"] == "cdi.engine.config"]
    assert check["status"] == "FAIL", check
    host = LayerBuilder("host")      # a host that passes (as test_fake_driver_podman's): only the cdi record is at stake
    host.evidence = {"driver_root": "/", "root": "/", "nvml": {"ok": True, "gpus": [{"index": 0, "uuid": "GPU-0", "compute_processes": []}]}}
    records = {"host": host.build(status=PASS), "cdi": cdi}
    blocked = layer_gate(records)
    assert blocked == "blocked by cdi FAIL"
    v = node_verdict(dict(records, **gated(blocked)))
    assert (v["verdict"], v["layer"], v["signature"].split(":")[0]) == ("FAILED_AT_CDI", "cdi", "cdi.engine.config"), v


def test_the_running_kubelet_and_the_containerd_serving_its_endpoint(lab):  # pylint: disable=redefined-outer-name
    from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import nodefs  # pylint: disable=import-outside-toplevel
    endpoint, real, containerd, config = _kubeadm_node(lab)
    kubelet = lab.stand_in("kubelet", "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf",
                           "--kubeconfig=/etc/kubernetes/kubelet.conf", "--container-runtime-endpoint=%s" % endpoint)
    # this machine's processes, the two of this test only (other runs on the machine may have their own)
    procs = [p for p in nodefs.processes("/") if p["pid"] in (kubelet.pid, containerd.pid)]
    [info] = sel.select_runtimes("auto", descriptor=DESCRIPTOR, procs=procs)
    assert (info["name"], info["version"], info["usable"], info["endpoint"]) == ("containerd", "1.7.24~ds1", True, endpoint)
    daemon = info["selection"]["daemon"]
    assert (daemon["pid"], daemon["socket"], daemon["config_files"]) == (containerd.pid, real, [config])
    unit = nodefs.proc_unit("/", kubelet.pid)      # the cgroup this test runs in, if it is a service's
    containerd_unit = nodefs.proc_unit("/", containerd.pid)
    assert info["selected_because"] == "; ".join([
        "containerd 1.7.24~ds1 at %s, the CRI endpoint of the running kubelet (pid %d%s): --container-runtime-endpoint=%s on the "
        "running kubelet's command line (/proc/%d/cmdline)" % (endpoint, kubelet.pid, ", %s" % unit if unit else "", endpoint, kubelet.pid),
        "that is the socket %s, served by containerd (pid %d%s) at %s configured by %s" % (
            real, containerd.pid, ", %s" % containerd_unit if containerd_unit else "", real, config),
        "the CRI Version call there answered containerd 1.7.24~ds1"])
    # where it listens is what the kernel says (its open socket), and it is the configured one
    [d] = [d for d in sel.kubelet_endpoint("/", procs)["daemons"] if d["pid"] == containerd.pid]
    assert d["listening"] == [real, real + ".ttrpc"] and d["socket"] == real and d["errors"] == []


def _k3s_node(lab_, other, sandbox):
    """The k3s tree under the lab, a real containerd at k3s's socket and another at the node path ``other``: (root,
    k3s's socket's path on this machine)."""
    node = os.path.join(lab_.base, "node")
    layoutfixture.build("k3s", node)
    k3s_sock = os.path.join(node, "run", "k3s", "containerd", "containerd.sock")
    lab_.containerd(k3s_sock, sandbox="rancher/mirrored-pause:3.6")
    lab_.containerd(os.path.join(node, other.lstrip("/")), sandbox=sandbox)
    return node, k3s_sock


def test_k3s_node_with_two_containerds_takes_the_kubelets(lab, bindir, monkeypatch):  # pylint: disable=redefined-outer-name
    node, k3s_sock = _k3s_node(lab, "/run/containerd/containerd.sock", "registry.k8s.io/pause:3.10")
    monkeypatch.setenv("HOME", "/root")
    [info] = sel.select_runtimes("auto", root=node, descriptor=DESCRIPTOR)
    # the real containerd behind k3s's socket answered (its sandbox image, from its CRI Status configuration)
    assert (info["name"], info["version"], info["usable"], info["sandbox_image"]) == (
        "containerd", "1.7.24~ds1", True, "rancher/mirrored-pause:3.6"), info
    assert info["endpoint"] == "unix://%s" % k3s_sock
    assert info["selection"]["endpoint"] == "unix:///run/k3s/containerd/containerd.sock"
    why = info["selected_because"]
    assert why.startswith("containerd 1.7.24~ds1 at unix:///run/k3s/containerd/containerd.sock, the CRI endpoint of the kubelet "
                          "inside k3s server (pid 812, ")
    assert why.endswith("the CRI Version call there answered containerd 1.7.24~ds1; also running, not the kubelet's: containerd "
                        "(pid 420, containerd.service) at /run/containerd/containerd.sock; dockerd (pid 455, docker.service)")


def test_an_unreadable_kubelet_config_verifies_no_runtime_in_its_place(lab, tmp_path):  # pylint: disable=redefined-outer-name
    """Issue 44 item 1: the kubelet's --config (0600, kubeadm >= 1.34 puts the endpoint there) names
    /run/containerd-gpu; a second real containerd answers at the default socket. Read unprivileged, the endpoint is
    unknown: no runtime is selected (neither daemon is asked), the cdi layer cannot judge one, the node is INCONCLUSIVE,
    never COMPUTE_VERIFIED about the default's containerd. Read as root, the kubelet's own containerd answers."""
    node = os.path.join(lab.base, "node")
    layoutfixture.build("kubeadm134-config0600", node)
    lab.containerd(os.path.join(node, "run", "containerd", "containerd.sock"), sandbox="registry.k8s.io/pause:3.10")
    lab.containerd(os.path.join(node, "run", "containerd-gpu", "containerd.sock"), sandbox="localhost/gpu-pause:1")
    with layoutfixture.unprivileged("kubeadm134-config0600", node) as uid:
        [info] = sel.select_runtimes("auto", root=node, descriptor=DESCRIPTOR)
    assert (info["name"], info["usable"], info["endpoint"], info.get("runtime_name")) == (None, False, None, None), info
    assert ("is unknown: kubelet config /var/lib/kubelet/config.yaml not readable by uid %d: Permission denied" % uid
            ) in info["selected_because"]
    engine = describe(info)
    engine["cdi_config"] = read_engine_config(engine)
    (tmp_path / "gpu.yaml").write_text('cdiVersion: "0.5.0"\nkind: "k.example.com/gpu"\ndevices:\n- name: "0"\n'
                                       '  containerEdits:\n    env: ["X=1"]\n')
    # the device's env X=1 is the test's own, no generator's: declared trusted (cdi.trust.accounted)
    cdi = cdi_layer(spec_dirs=[str(tmp_path)], discover_runtime_dirs_=False, devices=[DEVICE], kinds=["k.example.com/gpu"],
                    engines=[engine], trusted_edits=[{"env": "X", "why": "the test's device"}])
    [check] = [c for c in cdi["checks"] if c["id"] == "cdi.engine.config"]
    assert check["status"] == "NOT_RUN" and "could not be known" in check["observed"], check
    from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import not_run  # pylint: disable=import-outside-toplevel
    host = LayerBuilder("host")
    host.evidence = {"driver_root": "/", "root": "/", "nvml": {"ok": True, "gpus": [{"index": 0, "uuid": "GPU-0", "compute_processes": []}]}}
    records = {"host": host.build(status=PASS), "cdi": cdi, "runtime": not_run("runtime", info["reason"], {"engine": info}),
               "compute": not_run("compute", "blocked: no runtime")}
    v = node_verdict(records)
    assert v["verdict"] == "INCONCLUSIVE", v
    undeclared = cdi_layer(spec_dirs=[str(tmp_path)], discover_runtime_dirs_=False, devices=[DEVICE],
                           kinds=["k.example.com/gpu"], engines=[engine])
    v = node_verdict(dict(records, cdi=undeclared))
    assert (v["verdict"], v["signature"]) == ("FAILED_AT_CDI", "cdi.trust.accounted"), v
    # read as root, the same node's kubelet uses the containerd at /run/containerd-gpu, which answers
    [info] = sel.select_runtimes("auto", root=node, descriptor=DESCRIPTOR)
    assert (info["name"], info["usable"], info["sandbox_image"], info["selection"]["endpoint"]) == (
        "containerd", True, "localhost/gpu-pause:1", "unix:///run/containerd-gpu/containerd.sock"), info


def test_k3s_kubelet_arg_added_after_start_does_not_win(lab, bindir, monkeypatch):  # pylint: disable=redefined-outer-name,unused-argument
    """Issue 44 item 3: k3s runs with the drop-in it wrote at start (its containerd's socket); a kubelet-arg naming
    another real containerd is added to config.yaml afterwards. The running kubelet's containerd (k3s's) is the one
    asked, and the sentence says the edited file is the next start's; with the file older than the drop-in (there at
    start) the kubelet-arg's containerd is."""
    node, _k3s_sock = _k3s_node(lab, "/run/gpu/containerd.sock", "localhost/gpu-pause:1")
    monkeypatch.setenv("HOME", "/root")
    config = os.path.join(node, "etc", "rancher", "k3s", "config.yaml")
    with open(config, "a") as fh:
        fh.write("kubelet-arg:\n  - container-runtime-endpoint=unix:///run/gpu/containerd.sock\n")
    started = os.stat(os.path.join(node, "var/lib/rancher/k3s/agent/etc/kubelet.conf.d/00-k3s-defaults.conf")).st_mtime
    os.utime(config, (started + 60, started + 60))
    [info] = sel.select_runtimes("auto", root=node, descriptor=DESCRIPTOR)
    assert (info["name"], info["usable"], info["sandbox_image"], info["selection"]["endpoint"]) == (
        "containerd", True, "rancher/mirrored-pause:3.6", "unix:///run/k3s/containerd/containerd.sock"), info
    assert "in /etc/rancher/k3s/config.yaml was written after k3s started" in info["selected_because"]
    os.utime(config, (started - 60, started - 60))
    [info] = sel.select_runtimes("auto", root=node, descriptor=DESCRIPTOR)
    assert (info["sandbox_image"], info["selection"]["endpoint"]) == ("localhost/gpu-pause:1", "unix:///run/gpu/containerd.sock"), info
