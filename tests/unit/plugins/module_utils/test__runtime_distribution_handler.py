"""The GPU Pods' handler on k3s, RKE2 and MicroK8s (issue 44 item 4): from the cluster where a kubeconfig is on the node
(the distribution's admin kubeconfig, which kubectl itself does not look for), else from the distribution's own rule,
named with its source. The k3s/RKE2/MicroK8s node trees are tests/unit/fixtures/layouts; the engines' handlers are
what a running containerd's CRI Status reports (``cdi_config.handlers``)."""
import os

import pytest

import layoutfixture  # tests/conftest.py puts tests/unit/fixtures/layouts on sys.path

from ansible_collections.gpuprobe.layers.plugins.module_utils._k8s import kubectl as _kubectl
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import handler as _handler
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import layouts
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import nodefs


def _engine(layout, handlers, default="runc"):
    return {"name": "containerd", "selection": {"layout": layout},
            "cdi_config": {"enabled": True, "spec_dirs": ["/etc/cdi"], "default_handler": default,
                           "handlers": dict((h, {"binary": "/usr/bin/%s" % h, "runtime_type": "io.containerd.runc.v2"}) for h in handlers)}}


K3S = ("runc", "nvidia", "nvidia-experimental", "nvidia-cdi")


@pytest.mark.parametrize("layout, handlers, default, name, request_, source", [
    ("k3s", K3S, "runc", "nvidia", "nvidia", "distribution"),
    ("rke2", K3S, "runc", "nvidia", "nvidia", "distribution"),
    ("k3s", K3S, "nvidia", "nvidia", "", "distribution"),                 # k3s --default-runtime nvidia: Pods get the default
    ("k3s", ("runc", "nvidia-cdi"), "runc", "nvidia-cdi", "nvidia-cdi", "distribution"),
    ("microk8s", ("runc", "nvidia-container-runtime"), "runc", "nvidia-container-runtime", "nvidia-container-runtime", "distribution"),
    ("microk8s", ("runc", "nvidia-container-runtime", "nvidia"), "runc", "nvidia", "nvidia", "distribution"),
    ("k3s", ("runc",), "runc", "runc", "", "default"),                     # k3s found no NVIDIA runtime: said, the default
    ("kubeadm", K3S, "runc", "runc", "", "default"),                       # not such a distribution: the engine's default
])
def test_the_distributions_rule(layout, handlers, default, name, request_, source):
    h = _handler.choose(_engine(layout, handlers, default), k8s={"error": "k8s NOT_RUN: no kubeconfig"})
    assert (h["name"], h["request"], h["source"]) == (name, request_, source), h
    if layout == "k3s" and handlers == ("runc",):
        assert h["why"].endswith("but the running engine has none of the GPU handlers nvidia, nvidia-cdi, nvidia-experimental, "
                                 "nvidia-legacy, nvidia-container-runtime"), h["why"]


def test_the_cluster_wins_over_the_rule():
    k8s = {"node": "gpu-1", "gpu_pods": [{"on_this_node": True, "handler": "nvidia-cdi"}]}
    h = _handler.choose(_engine("k3s", K3S), k8s=k8s)
    assert (h["name"], h["source"]) == ("nvidia-cdi", "k8s")


@pytest.mark.parametrize("layout, dist, kubeconfig", [
    ("k3s", "k3s", "/etc/rancher/k3s/k3s.yaml"), ("rke2", "rke2", "/etc/rancher/rke2/rke2.yaml"),
    ("microk8s", "microk8s", "/var/snap/microk8s/current/credentials/client.config"), ("kubeadm-containerd17", None, None)])
def test_the_distributions_admin_kubeconfig(tmp_path, layout, dist, kubeconfig):
    root = layoutfixture.build(layout, str(tmp_path / "node"))
    assert layouts.distribution(root)[0] == dist
    env, home = {}, str(tmp_path / "home")
    reason = _kubectl.kubeconfig_reason(None, env, home, root=root)
    if kubeconfig is None:
        assert reason.startswith("no kubeconfig: option kubeconfig not given, KUBECONFIG unset") and _kubectl.implicit_kubeconfig(env, home, root) is None
        return
    # not written (an agent node, or not yet): said in the reason
    assert ("%s's admin kubeconfig %s absent, not running in a Pod" % (dist, kubeconfig)) in reason, reason
    path = os.path.join(root, kubeconfig.lstrip("/"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as fh:
        fh.write("apiVersion: v1\nkind: Config\nclusters: []\n")
    assert _kubectl.kubeconfig_reason(None, env, home, root=root) is None
    assert _kubectl.implicit_kubeconfig(env, home, root) == path
    # kubectl's own kubeconfig, where there is one, is kubectl's choice
    os.makedirs(os.path.join(home, ".kube"))
    with open(os.path.join(home, ".kube", "config"), "w") as fh:
        fh.write("apiVersion: v1\n")
    assert _kubectl.implicit_kubeconfig(env, home, root) is None


def test_the_processes_read_once_give_the_same_reason(tmp_path, monkeypatch):
    """The inspect stage reads /proc once for the runtime selection and the k8s layer: the kubeconfig's reason from
    those processes is the one the k8s layer finds when it reads /proc itself, and /proc is not read again."""
    root = layoutfixture.build("k3s", str(tmp_path / "node"))
    env, home = {}, str(tmp_path / "home")
    read_itself = _kubectl.kubeconfig_reason(None, env, home, root=root)
    procs = nodefs.processes(root)

    def no_second_read(*_args, **_kwargs):
        raise AssertionError("/proc read again")
    monkeypatch.setattr(nodefs, "processes", no_second_read)
    assert _kubectl.kubeconfig_reason(None, env, home, root=root, procs=procs) == read_itself
    assert "k3s's admin kubeconfig /etc/rancher/k3s/k3s.yaml absent" in read_itself, read_itself


def test_an_unnamed_default_handler_is_said_once():
    """docs/runtimes.md's stale-socket sentence: an engine whose configuration was not read has a default handler of
    no known name; the sentence says so once ("(the default) (the engine's default)" before)."""
    info = {"name": "containerd", "version": "1.7.24", "cdi_config": {"enabled": None, "reason": "not read"},
            "selected_because": "containerd at unix:///run/containerd/containerd.sock (not answering)"}
    _handler.attach(info)
    assert info["selected_because"].endswith("; the probe's handler: the engine's default (its name unknown: the engine's "
                                             "configuration was not read)"), info["selected_because"]
