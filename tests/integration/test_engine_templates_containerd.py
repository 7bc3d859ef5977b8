"""The template a distribution regenerates containerd's configuration from at every start (issue 44 item 6), with a
REAL containerd 1.7.24 (containerd_lab.py) whose ``--config`` is the generated file of a k3s or MicroK8s node tree
(tests/unit/fixtures/layouts), the template beside it:

- k3s: ``config.toml.tmpl`` changed to default ``nvidia`` (a full template) while the daemon runs runc: a
  ``cdi.engine.template`` WARN names the template, the running daemon's and the file's value, and says the next start
  runs the template's; a template that adds (``{{ template "base" . }}``) the handler the daemon has: PASS; one naming
  another binary for it: WARN;
- MicroK8s: ``containerd-template.toml`` with ``default_runtime_name = "${RUNTIME}"``: the wrapper's rule gives
  ``nvidia-container-runtime`` once ``$SNAP_DATA/var/lock/gpu`` exists (WARN, the running daemon runs runc), ``runc``
  without it (PASS).
The comparison is with the running daemon's CRI Status configuration, which the selection read at its socket."""
import os
import shutil
import tempfile

import pytest

import containerd_lab as lab
import layoutfixture  # tests/conftest.py puts tests/unit/fixtures/layouts on sys.path

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import engine_template as _template
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.engine import describe, read_engine_config
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import select as sel

pytestmark = pytest.mark.integration


@pytest.fixture()
def node():
    why = lab.missing()
    if why:
        pytest.skip(why)
    short = tempfile.mkdtemp(prefix="gtm-", dir="/tmp")     # a socket path has 108 bytes
    started = []

    def build(layout, confdir, config_name, handlers=None):
        root = layoutfixture.build(layout, os.path.join(short, "n"), processes=False)
        d = lab.Containerd(os.path.join(root, confdir.lstrip("/")), handlers=handlers or {})
        d.config = os.path.join(d.base, config_name)
        d.start(images=())
        started.append(d)
        return root, d

    yield build
    for d in started:
        d.stop()
    shutil.rmtree(short, ignore_errors=True)


def _engine(d):
    [info] = sel.select_runtimes("containerd", endpoint=d.endpoint, descriptor=lab.DESCRIPTOR)
    assert info["usable"], info
    engine = describe(info)
    engine["cdi_config"] = read_engine_config(engine)
    return engine


K3S_DIR = "/var/lib/rancher/k3s/agent/etc/containerd"


def test_k3s_template_changed_to_default_nvidia_is_the_next_start(node):
    bindir = tempfile.mkdtemp(prefix="gtm-bin-", dir="/tmp")
    nvidia = lab.recorder(bindir, "nvidia")
    try:
        _k3s_templates(node, nvidia)
    finally:
        shutil.rmtree(bindir, ignore_errors=True)


def _k3s_templates(node, nvidia):  # pylint: disable=redefined-outer-name
    root, d = node("k3s", K3S_DIR, "config.toml", {"nvidia": nvidia})
    tmpl = os.path.join(root, K3S_DIR.lstrip("/"), "config.toml.tmpl")
    # a full template: the generated file as it is, but nvidia the default
    with open(tmpl, "w") as fh:
        fh.write(d.config_text(True).replace('default_runtime_name = "runc"', 'default_runtime_name = "nvidia"'))
    [check] = _template.checks(_engine(d))
    assert check["status"] == "WARN", check
    assert check["observed"] == (
        "%s: default handler: the template says nvidia, the running daemon runc, the generated file runc; the next start "
        "regenerates %s from it and runs what the template says" % (tmpl, d.config)), check["observed"]
    # a template that adds to k3s's base the handler the daemon runs: no change at the next start
    with open(tmpl, "w") as fh:
        fh.write('{{ template "base" . }}\n\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes."nvidia"]\n'
                 '  runtime_type = "io.containerd.runc.v2"\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes."nvidia".options]\n'
                 '  BinaryName = "%s"\n' % nvidia)
    [check] = _template.checks(_engine(d))
    assert check["status"] == "PASS" and "(k3s's base and what it adds) agrees with the running daemon" in check["observed"], check
    # the same, naming NVIDIA's binary (as the GPU Operator's toolkit writes it): the next start runs that binary
    with open(tmpl, "w") as fh:
        fh.write('{{ template "base" . }}\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes."nvidia".options]\n'
                 '  BinaryName = "/usr/local/nvidia/toolkit/nvidia-container-runtime"\n')
    [check] = _template.checks(_engine(d))
    assert check["status"] == "WARN" and ("handler nvidia: the template says /usr/local/nvidia/toolkit/nvidia-container-runtime, "
                                          "the running daemon %s" % nvidia) in check["observed"], check


def test_microk8s_template_and_the_wrappers_runtime(node):
    args = "/var/snap/microk8s/7229/args"
    root, d = node("microk8s", args, "containerd.toml")
    tmpl = os.path.join(root, args.lstrip("/"), "containerd-template.toml")
    with open(tmpl, "w") as fh:
        fh.write(d.config_text(True).replace('default_runtime_name = "runc"', 'default_runtime_name = "${RUNTIME}"')
                 .replace(d.base, "${SNAP_DATA}/args"))
    engine = _engine(d)
    [check] = _template.checks(engine)
    assert check["status"] == "PASS", check
    lock = os.path.join(root, "var/snap/microk8s/7229/var/lock/gpu")
    os.makedirs(os.path.dirname(lock))
    open(lock, "w").close()
    [check] = _template.checks(_engine(d))
    assert check["status"] == "WARN" and "default handler: the template says nvidia-container-runtime, the running daemon runc" \
        in check["observed"], check
