"""The runtime path per node layout (issue 35): each tree of tests/unit/fixtures/layouts, its processes running or not,
through ``select_runtimes("auto", root=<the tree>)``: the runtime selected, the endpoint as the node names it, and the
one sentence that says why, exactly. The CRI daemons cannot run here: what the CRI Version call answers at a node's
socket is a stand-in (``answers``); tests/integration/test_runtime_layouts_containerd.py has a real containerd behind
those paths. The docker CLI is a stand-in that records the DOCKER_HOST it was called with and answers with the recorded
docker 26.1.5 info."""
import os

import pytest
from fakebin import write_exe  # tests/conftest.py puts tests/unit/fixtures/host on sys.path

import layoutfixture  # tests/conftest.py puts tests/unit/fixtures/layouts on sys.path

from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import select as sel

ENGINES_FIX = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "engines")
# what the CRI Version call answers at a socket (its real path on the node)
ANSWERS = {"/run/containerd/containerd.sock": ("containerd", "1.7.24"), "/run/k3s/containerd/containerd.sock": ("containerd", "2.0.5-k3s1"),
           "/run/crio/crio.sock": ("cri-o", "1.31.3"), "/var/snap/microk8s/common/run/containerd.sock": ("containerd", "1.7.27")}

# (layout, processes running): (engine, version, the endpoint as the node names it, its socket's real path, the pid serving it)
CASES = {
    ("kubeadm-containerd17", True): ("containerd", "1.7.24", "unix:///var/run/containerd/containerd.sock", "/run/containerd/containerd.sock", 512),
    ("kubeadm-containerd17", False): ("containerd", "1.7.24", "unix:///var/run/containerd/containerd.sock", "/run/containerd/containerd.sock", None),
    ("containerd2-imports", True): ("containerd", "1.7.24", "unix:///run/containerd/containerd.sock", "/run/containerd/containerd.sock", 1733),
    ("containerd2-imports", False): ("containerd", "1.7.24", "unix:///run/containerd/containerd.sock", "/run/containerd/containerd.sock", None),
    ("k3s", True): ("containerd", "2.0.5-k3s1", "unix:///run/k3s/containerd/containerd.sock", "/run/k3s/containerd/containerd.sock", 866),
    ("k3s", False): ("containerd", "2.0.5-k3s1", "unix:///run/k3s/containerd/containerd.sock", "/run/k3s/containerd/containerd.sock", None),
    ("rke2", True): ("containerd", "2.0.5-k3s1", "unix:///run/k3s/containerd/containerd.sock", "/run/k3s/containerd/containerd.sock", 1958),
    ("rke2", False): ("containerd", "2.0.5-k3s1", "unix:///run/k3s/containerd/containerd.sock", "/run/k3s/containerd/containerd.sock", None),
    ("kubespray-crio", True): ("crio", "1.31.3", "unix:///var/run/crio/crio.sock", "/run/crio/crio.sock", 733),
    ("kubespray-crio", False): ("crio", "1.31.3", "unix:///var/run/crio/crio.sock", "/run/crio/crio.sock", None),
    ("microk8s", True): ("containerd", "1.7.27", "unix:///var/snap/microk8s/common/run/containerd.sock",
                         "/var/snap/microk8s/common/run/containerd.sock", 1301),
    ("microk8s", False): ("containerd", "1.7.27", "unix:///var/snap/microk8s/common/run/containerd.sock",
                          "/var/snap/microk8s/common/run/containerd.sock", None),
    ("openshift-crio", True): ("crio", "1.31.3", "unix:///var/run/crio/crio.sock", "/run/crio/crio.sock", 2210),
    ("openshift-crio", False): ("crio", "1.31.3", "unix:///var/run/crio/crio.sock", "/run/crio/crio.sock", None),
    ("docker-context", False): ("docker", "26.1.5+dfsg1", "unix:///run/user/1000/docker.sock", None, None),
    ("docker-context-ssh", False): (None, None, None, None, None),
}

SENTENCES = {
    ('containerd2-imports', True): [
        'containerd 1.7.24 at unix:///run/containerd/containerd.sock, the CRI endpoint of the running kubelet (pid 2010, '
        'kubelet.service) on this eks node: containerRuntimeEndpoint in /etc/kubernetes/kubelet/config.json (the running '
        "kubelet's --config)",
        'that is the socket /run/containerd/containerd.sock, served by containerd (pid 1733, containerd.service) at '
        '/run/containerd/containerd.sock configured by /etc/containerd/config.toml, /etc/containerd/config.d/50-nvidia.toml',
        'the CRI Version call there answered containerd 1.7.24'],
    ('containerd2-imports', False): [
        'containerd 1.7.24 at unix:///run/containerd/containerd.sock, the CRI endpoint of the kubelet, not running (a kubelet '
        'is installed: unit /etc/systemd/system/kubelet.service) on this eks node: containerRuntimeEndpoint in '
        "/etc/kubernetes/kubelet/config.json (kubelet.service's --config)",
        'that is the socket /run/containerd/containerd.sock, and no containerd or CRI-O process was found',
        'the CRI Version call there answered containerd 1.7.24'],
    ('docker-context', False): [
        'docker 26.1.5+dfsg1 at unix:///run/user/1000/docker.sock (context rootless: currentContext rootless in '
        '/root/.docker/config.json, Endpoints.docker.Host in '
        '/root/.docker/contexts/meta/12b961af5feb3e9d39f93b2cefb9a1a944f18d02cca0cac2f04f5a982240605f/meta.json), no kubelet '
        'installed or running (no kubelet, kubelite, k3s or rke2 process, no kubelet binary, kubelet.service unit, '
        '/var/lib/kubelet/config.yaml, k3s/RKE2 configuration or MicroK8s args)',
        "a docker daemon is running (docker info answered there): a docker host's workloads run through docker"],
    ('docker-context-ssh', False): [
        'no kubelet installed or running (no kubelet, kubelite, k3s or rke2 process, no kubelet binary, kubelet.service unit, '
        '/var/lib/kubelet/config.yaml, k3s/RKE2 configuration or MicroK8s args)',
        'docker not asked: the docker CLI would talk to ssh://gpu@10.0.0.5 (context gpu-remote: currentContext gpu-remote in '
        '/root/.docker/config.json, Endpoints.docker.Host in '
        '/root/.docker/contexts/meta/d8e14b925017330d02fd9da4d57a6b1c410bc10bcf1549474406bfa299cd4ba1/meta.json), not a local '
        "unix socket: that daemon may be another machine's and the node's verdict must be about this node (set "
        "DOCKER_HOST=unix:///... or runtime_endpoint to this node's docker socket)",
        'podman not found'],
    ('k3s', True): [
        'containerd 2.0.5-k3s1 at unix:///run/k3s/containerd/containerd.sock, the CRI endpoint of the kubelet inside k3s server'
        ' (pid 812, whose arguments k3s erases from /proc: its options were read from ExecStart= of k3s.service in '
        '/etc/systemd/system/k3s.service with /etc/systemd/system/k3s.service.env, /etc/rancher/k3s/config.yaml, '
        '/etc/rancher/k3s/config.yaml.d/10-gpu.yaml) on this k3s node: containerRuntimeEndpoint in '
        '/var/lib/rancher/k3s/agent/etc/kubelet.conf.d/00-k3s-defaults.conf, in the kubelet configuration drop-ins k3s writes '
        'at start (/var/lib/rancher/k3s/agent/etc/kubelet.conf.d)',
        'that is the socket /run/k3s/containerd/containerd.sock, served by containerd (pid 866, started by k3s (pid 812)) at '
        '/run/k3s/containerd/containerd.sock configured by /var/lib/rancher/k3s/agent/etc/containerd/config.toml (generated by '
        'k3s, from /var/lib/rancher/k3s/agent/etc/containerd/config.toml.tmpl)',
        'the CRI Version call there answered containerd 2.0.5-k3s1',
        "also running, not the kubelet's: containerd (pid 420, containerd.service) at /run/containerd/containerd.sock",
        'dockerd (pid 455, docker.service)'],
    ('k3s', False): [
        'containerd 2.0.5-k3s1 at unix:///run/k3s/containerd/containerd.sock, the CRI endpoint of the kubelet of k3s, installed'
        ' but not running (its options: ExecStart= of k3s.service in /etc/systemd/system/k3s.service with '
        '/etc/systemd/system/k3s.service.env, /etc/rancher/k3s/config.yaml, /etc/rancher/k3s/config.yaml.d/10-gpu.yaml) on this'
        ' k3s node: containerRuntimeEndpoint in /var/lib/rancher/k3s/agent/etc/kubelet.conf.d/00-k3s-defaults.conf, in the '
        'kubelet configuration drop-ins k3s writes at start (/var/lib/rancher/k3s/agent/etc/kubelet.conf.d)',
        'that is the socket /run/k3s/containerd/containerd.sock, and no containerd or CRI-O process was found',
        'the CRI Version call there answered containerd 2.0.5-k3s1'],
    ('kubeadm-containerd17', True): [
        'containerd 1.7.24 at unix:///var/run/containerd/containerd.sock, the CRI endpoint of the running kubelet (pid 901, '
        'kubelet.service) on this kubeadm node: --container-runtime-endpoint=unix:///var/run/containerd/containerd.sock on the '
        "running kubelet's command line (/proc/901/cmdline)",
        'that is the socket /run/containerd/containerd.sock, served by containerd (pid 512, containerd.service) at '
        '/run/containerd/containerd.sock configured by /etc/containerd/config.toml',
        'the CRI Version call there answered containerd 1.7.24'],
    ('kubeadm-containerd17', False): [
        'containerd 1.7.24 at unix:///var/run/containerd/containerd.sock, the CRI endpoint of the kubelet, not running (a '
        'kubelet is installed: unit /usr/lib/systemd/system/kubelet.service, drop-in '
        '/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf, /var/lib/kubelet/config.yaml, '
        '/var/lib/kubelet/kubeadm-flags.env) on this kubeadm node: '
        "--container-runtime-endpoint=unix:///var/run/containerd/containerd.sock on kubelet.service's command line (ExecStart= "
        'of kubelet.service in /usr/lib/systemd/system/kubelet.service, '
        '/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf with /var/lib/kubelet/kubeadm-flags.env)',
        'that is the socket /run/containerd/containerd.sock, and no containerd or CRI-O process was found',
        'the CRI Version call there answered containerd 1.7.24'],
    ('kubespray-crio', True): [
        'crio 1.31.3 at unix:///var/run/crio/crio.sock, the CRI endpoint of the running kubelet (pid 1024, kubelet.service) on '
        "this kubespray node: --container-runtime-endpoint=unix:///var/run/crio/crio.sock on the running kubelet's command line"
        ' (/proc/1024/cmdline)',
        'that is the socket /run/crio/crio.sock, served by crio (pid 733, crio.service) at /var/run/crio/crio.sock configured '
        'by /etc/crio/crio.conf',
        'the CRI Version call there answered cri-o 1.31.3'],
    ('kubespray-crio', False): [
        'crio 1.31.3 at unix:///var/run/crio/crio.sock, the CRI endpoint of the kubelet, not running (a kubelet is installed: '
        'unit /etc/systemd/system/kubelet.service) on this kubespray node: '
        "--container-runtime-endpoint=unix:///var/run/crio/crio.sock on kubelet.service's command line (ExecStart= of "
        'kubelet.service in /etc/systemd/system/kubelet.service with /etc/kubernetes/kubelet.env)',
        'that is the socket /run/crio/crio.sock, and no containerd or CRI-O process was found',
        'the CRI Version call there answered cri-o 1.31.3'],
    ('microk8s', True): [
        'containerd 1.7.27 at unix:///var/snap/microk8s/common/run/containerd.sock, the CRI endpoint of the running kubelite '
        '(pid 1388, snap.microk8s.daemon-kubelite.service, --kubelet-args-file /var/snap/microk8s/7229/args/kubelet) on this '
        "microk8s node: --container-runtime-endpoint=/var/snap/microk8s/common/run/containerd.sock on the running kubelite's "
        'command line (its --kubelet-args-file /var/snap/microk8s/7229/args/kubelet)',
        'that is the socket /var/snap/microk8s/common/run/containerd.sock, served by containerd (pid 1301, '
        'snap.microk8s.daemon-containerd.service) at /var/snap/microk8s/common/run/containerd.sock configured by '
        '/var/snap/microk8s/7229/args/containerd.toml',
        'the CRI Version call there answered containerd 1.7.27'],
    ('microk8s', False): [
        "containerd 1.7.27 at unix:///var/snap/microk8s/common/run/containerd.sock, the CRI endpoint of MicroK8s' kubelet, "
        'kubelite not running (/var/snap/microk8s/current/args/kubelet) on this microk8s node: '
        "--container-runtime-endpoint=/var/snap/microk8s/common/run/containerd.sock on kubelite's command line (its "
        '--kubelet-args-file /var/snap/microk8s/current/args/kubelet, kubelite not running)',
        'that is the socket /var/snap/microk8s/common/run/containerd.sock, and no containerd or CRI-O process was found',
        'the CRI Version call there answered containerd 1.7.27'],
    ('openshift-crio', True): [
        'crio 1.31.3 at unix:///var/run/crio/crio.sock, the CRI endpoint of the running hyperkube kubelet (pid 2399, '
        "kubelet.service) on this openshift node: --container-runtime-endpoint=/var/run/crio/crio.sock on the running kubelet's"
        ' command line (/proc/2399/cmdline)',
        'that is the socket /run/crio/crio.sock, served by crio (pid 2210, crio.service) at /var/run/crio/crio.sock configured '
        'by /etc/crio/crio.conf, /etc/crio/crio.conf.d/00-default',
        'the CRI Version call there answered cri-o 1.31.3'],
    ('openshift-crio', False): [
        'crio 1.31.3 at unix:///var/run/crio/crio.sock, the CRI endpoint of the kubelet, not running (a kubelet is installed: '
        'unit /etc/systemd/system/kubelet.service, drop-in /etc/systemd/system/kubelet.service.d/10-mco-default-madv.conf) on '
        "this openshift node: --container-runtime-endpoint=/var/run/crio/crio.sock on kubelet.service's command line "
        '(ExecStart= of kubelet.service in /etc/systemd/system/kubelet.service, '
        '/etc/systemd/system/kubelet.service.d/10-mco-default-madv.conf with /etc/os-release)',
        'that is the socket /run/crio/crio.sock, and no containerd or CRI-O process was found',
        'the CRI Version call there answered cri-o 1.31.3'],
    ('rke2', True): [
        'containerd 2.0.5-k3s1 at unix:///run/k3s/containerd/containerd.sock, the CRI endpoint of the running kubelet (pid '
        '2057, rke2-server.service), started by rke2 server (pid 1594) on this rke2 node: containerRuntimeEndpoint in '
        "/var/lib/rancher/rke2/agent/etc/kubelet.conf.d/00-rke2-defaults.conf (the running kubelet's --config-dir)",
        'that is the socket /run/k3s/containerd/containerd.sock, served by containerd (pid 1958, started by rke2 (pid 1594)) at'
        ' /run/k3s/containerd/containerd.sock configured by /var/lib/rancher/rke2/agent/etc/containerd/config.toml (generated '
        'by rke2, from its built-in template)',
        'the CRI Version call there answered containerd 2.0.5-k3s1'],
    ('rke2', False): [
        'containerd 2.0.5-k3s1 at unix:///run/k3s/containerd/containerd.sock, the CRI endpoint of the kubelet of rke2, '
        'installed but not running (its options: ExecStart= of rke2-server.service in '
        '/usr/local/lib/systemd/system/rke2-server.service, /etc/rancher/rke2/config.yaml) on this rke2 node: '
        'containerRuntimeEndpoint in /var/lib/rancher/rke2/agent/etc/kubelet.conf.d/00-rke2-defaults.conf, in the kubelet '
        'configuration drop-ins rke2 writes at start (/var/lib/rancher/rke2/agent/etc/kubelet.conf.d)',
        'that is the socket /run/k3s/containerd/containerd.sock, and no containerd or CRI-O process was found',
        'the CRI Version call there answered containerd 2.0.5-k3s1'],

}


def _node_socket(root, endpoint):
    """The real path on the node of the socket an endpoint names, whether it was dialled under the root or as the node
    names it (/var/run is /run on every layout here)."""
    path = (endpoint or "")[len("unix://"):]
    if path.startswith(root + "/"):
        path = path[len(root):]
    return "/run/" + path[len("/var/run/"):] if path.startswith("/var/run/") else path


@pytest.fixture()
def node(tmp_path, bindir, monkeypatch):
    """build(layout, running): the layout's tree under tmp_path/node, a CRI stand-in answering ANSWERS at its sockets,
    docker and podman CLIs that answer (docker records the DOCKER_HOST of each call), HOME /root (the tree's)."""
    calls = bindir / "docker.calls"
    write_exe(bindir, "docker", 'echo "DOCKER_HOST=$DOCKER_HOST $*" >> "%s"\n/bin/cat "%s"\n' % (
        calls, os.path.join(ENGINES_FIX, "docker-26.1.5-info-cdi.recorded.json")))
    monkeypatch.setenv("HOME", "/root")
    for var in ("DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_CONFIG", "CONTAINER_RUNTIME_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)
    root = str(tmp_path / "node")

    def cri_info(name, endpoint, timeout, descriptor=None):  # pylint: disable=unused-argument
        answer = ANSWERS.get(_node_socket(root, endpoint))
        if answer is None:
            return {"name": name, "endpoint": endpoint, "usable": False, "version": None, "reason": "connection refused"}
        return {"name": {"cri-o": "crio"}.get(answer[0], answer[0]), "endpoint": endpoint, "usable": True,
                "version": answer[1], "reason": None, "runtime_name": answer[0]}

    monkeypatch.setattr(sel, "cri_info", cri_info)

    def build(layout, running):
        layoutfixture.build(layout, root, processes=running)
        return root, calls

    return build


@pytest.mark.parametrize("layout, running", sorted(CASES), ids=lambda v: v if isinstance(v, str) else ("running" if v else "stopped"))
def test_the_runtime_endpoint_and_the_sentence(node, layout, running):
    root, calls = node(layout, running)
    engine, version, endpoint, socket, pid = CASES[(layout, running)]
    [info] = sel.select_runtimes("auto", root=root)
    assert info["selected_because"] == "; ".join(SENTENCES[(layout, running)])
    assert (info["name"], info["version"]) == (engine, version)
    if engine in ("containerd", "crio"):
        selection = info["selection"]
        assert (selection["endpoint"], selection["socket"], (selection["daemon"] or {}).get("pid")) == (endpoint, socket, pid)
        assert selection["handler"] is None and selection["sentence"] == info["selected_because"]
        assert _node_socket(root, info["endpoint"]) == socket        # dialled: that socket, under the tree
    elif engine == "docker":
        # the endpoint the docker CLI really uses, named, and pinned for every docker call of the run
        assert (info["endpoint"], info["env"]) == (endpoint, {"DOCKER_HOST": endpoint})
        assert calls.read_text().splitlines() == ["DOCKER_HOST=%s info --format {{json .}}" % endpoint]
    else:
        # an ssh:// context is another machine: refused, and never asked
        assert info["usable"] is False and not calls.exists()


def test_k3s_with_docker_running_is_not_docker(node):
    """Issue 35 item 1: docker answers and a system containerd runs, yet the Pods' runtime is k3s's containerd."""
    root, calls = node("k3s", True)
    [info] = sel.select_runtimes("auto", root=root)
    assert info["name"] == "containerd" and info["selection"]["layout"] == "k3s" and not calls.exists()
    assert info["selection"]["others"] == ["containerd (pid 420, containerd.service) at /run/containerd/containerd.sock",
                                           "dockerd (pid 455, docker.service)"]


def test_named_crio_on_kubespray_takes_the_kubelets_socket(node):
    """Issue 35 item 2: ``runtime: crio`` (named, no endpoint) on the Kubespray node reaches CRI-O where the kubelet does."""
    root, _calls = node("kubespray-crio", False)
    [info] = sel.select_runtimes("crio", root=root)
    assert info["usable"] and _node_socket(root, info["endpoint"]) == "/run/crio/crio.sock"


def test_the_kubelets_pod_settings_go_with_its_engine(node):
    """Issue 44: the engine the kubelet's endpoint selects carries what the kubelet sends in RunPodSandbox and where it
    pulls (auto, and a named engine that serves that endpoint), for the CRI probe to do the same."""
    root, _calls = node("kubeadm-containerd17", True)
    [info] = sel.select_runtimes("auto", root=root)
    assert info["kubelet_pod"]["cgroup_driver"] == {"value": "systemd", "source": "cgroupDriver in /var/lib/kubelet/config.yaml"}
    assert info["kubelet_pod"]["image_endpoint"]["value"] == ""


def test_a_named_engine_serving_the_kubelets_endpoint_carries_its_pod_settings(node):
    root, _calls = node("kubespray-crio", False)
    [info] = sel.select_runtimes("crio", root=root)
    assert info["kubelet_pod"]["cgroup_driver"]["source"] == "cgroupDriver in /etc/kubernetes/kubelet-config.yaml"


def test_an_unreadable_kubelet_config_is_unknown_never_the_default(node):
    """Issue 44 item 1: kubeadm 1.34 writes the endpoint into config.yaml, kept 0600; a containerd runs at the default
    socket. Unprivileged, the endpoint is unknown: no runtime is selected, and the default's daemon is not asked."""
    root, calls = node("kubeadm134-config0600", True)
    with layoutfixture.unprivileged("kubeadm134-config0600", root) as uid:
        [info] = sel.select_runtimes("auto", root=root)
    assert (info["name"], info["usable"], info["endpoint"], info["version"]) == (None, False, None, None)
    assert info["selection"]["runtime"] == "no runtime verified (the kubelet's endpoint is unknown)"
    assert info["selected_because"] == (
        "no runtime verified (the kubelet's endpoint is unknown), the CRI endpoint of the running kubelet (pid 901, "
        "kubelet.service) on this kubeadm node is unknown: kubelet config /var/lib/kubelet/config.yaml not readable by uid "
        "%d: Permission denied; the running kubelet reads its configuration as root and does not fall back to the default "
        "unix:///run/containerd/containerd.sock, so no endpoint is assumed; running, none of them known to be the kubelet's: "
        "containerd (pid 512, containerd.service) at /run/containerd/containerd.sock; containerd (pid 530, "
        "containerd-gpu.service) at /run/containerd-gpu/containerd.sock" % uid)
    assert not calls.exists()
    # read by root, the same tree gives the kubelet's own containerd
    [info] = sel.select_runtimes("auto", root=root) if os.geteuid() == 0 else [None]
    if info is not None:
        assert info["selection"]["endpoint"] == "unix:///run/containerd-gpu/containerd.sock" and info["selection"]["daemon"]["pid"] == 530


@pytest.mark.parametrize("running, later, endpoint", [
    (True, True, "unix:///run/k3s/containerd/containerd.sock"),    # written after k3s started: the next start's
    (True, False, "unix:///run/gpu/containerd.sock"),               # there when k3s started: the kubelet's flag
    (False, True, "unix:///run/gpu/containerd.sock"),               # k3s not running: the next start is what counts
])
def test_k3s_kubelet_arg_written_after_start_is_not_live(node, running, later, endpoint):
    """Issue 44 item 3: k3s erases its argv; the drop-in it writes at start is the live state. A kubelet-arg added to
    config.yaml after that is the next start's endpoint, not the running kubelet's, and the sentence says so."""
    root, _calls = node("k3s", running)
    config = os.path.join(root, "etc/rancher/k3s/config.yaml")
    with open(config, "a") as fh:
        fh.write("kubelet-arg:\n  - container-runtime-endpoint=unix:///run/gpu/containerd.sock\n")
    dropin = os.path.join(root, "var/lib/rancher/k3s/agent/etc/kubelet.conf.d/00-k3s-defaults.conf")
    started = os.stat(dropin).st_mtime
    os.utime(config, (started + 60, started + 60) if later else (started - 60, started - 60))
    disc = sel.kubelet_endpoint(root)
    assert disc["endpoint"] == endpoint
    note = ("kubelet-arg container-runtime-endpoint=unix:///run/gpu/containerd.sock in /etc/rancher/k3s/config.yaml was "
            "written after k3s started (after the drop-in /var/lib/rancher/k3s/agent/etc/kubelet.conf.d/00-k3s-defaults.conf "
            "it wrote then): it is the next start's endpoint, not the running kubelet's")
    assert (note in disc["notes"]) == (running and later), disc["notes"]


def test_openshift_kubenswrapper_unit_with_the_endpoint_in_kubelet_conf(node):
    """docs/runtimes.md's OpenShift row: newer MCO units start ``/usr/local/bin/kubenswrapper /usr/bin/kubelet
    --config=/etc/kubernetes/kubelet.conf`` and the endpoint is the KubeletConfiguration's: read from the unit (not
    running), the layout is OpenShift and the endpoint kubelet.conf's."""
    root, _calls = node("openshift-crio", False)
    with open(os.path.join(root, "etc/systemd/system/kubelet.service"), "w") as fh:
        fh.write("[Service]\nExecStart=/usr/local/bin/kubenswrapper /usr/bin/kubelet --config=/etc/kubernetes/kubelet.conf "
                 "--bootstrap-kubeconfig=/etc/kubernetes/kubeconfig --kubeconfig=/var/lib/kubelet/kubeconfig\n")
    with open(os.path.join(root, "etc/kubernetes/kubelet.conf"), "a") as fh:
        fh.write("containerRuntimeEndpoint: unix:///var/run/crio/crio.sock\n")
    disc = sel.kubelet_endpoint(root)
    assert (disc["layout"], disc["endpoint"]) == ("openshift", "unix:///var/run/crio/crio.sock"), disc
    assert disc["source"] == "containerRuntimeEndpoint in /etc/kubernetes/kubelet.conf (kubelet.service's --config)"
