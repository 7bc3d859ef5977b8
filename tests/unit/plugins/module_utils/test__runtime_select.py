"""Which runtime a verdict speaks for (_runtime_select): the option, the kubelet's configured CRI endpoint (recorded
KubeletConfiguration / kubeadm files), and every branch of ``auto`` with fake engine executables on PATH. The CRI
daemon behind a socket cannot exist here: its Version answer comes from a stand-in for cri_info."""
import os
import shutil
import sys

import pytest
from fakebin import write_exe  # tests/conftest.py puts tests/unit/fixtures/host on sys.path

from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import kubelet as _kubelet
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import select as sel

FIX = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "engines")


def fixture(name):
    with open(os.path.join(FIX, name)) as fh:
        return fh.read()


# ---- the option ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value, names", [
    (None, ["auto"]), ("", ["auto"]), ("auto", ["auto"]), ("podman", ["podman"]), ("crio", ["crio"]),
    (["containerd", "docker"], ["containerd", "docker"]), ("containerd,docker", ["containerd", "docker"]),
])
def test_runtime_option(value, names):
    assert sel.parse_runtime_option(value) == names


@pytest.mark.parametrize("value, words", [
    ([], "empty list"), (["containerd", "nerdctl"], "unknown engine name(s) 'nerdctl'"), ("cri-o", "unknown"),
    (["auto", "docker"], "cannot be combined"), (["docker", "docker"], "docker named more than once"),
    (3, "must be 'auto', an engine name or a list"),
])
def test_runtime_option_errors(value, words):
    with pytest.raises(ValueError) as exc:
        sel.parse_runtime_option(value)
    assert words in str(exc.value)


@pytest.mark.parametrize("endpoint", ["tcp://10.0.0.1:1234", "/run/containerd/containerd.sock", "unix://run/x.sock",
                                      "npipe:////./pipe/containerd"])
def test_endpoint_must_be_unix_absolute(endpoint):
    with pytest.raises(ValueError, match="only unix:///absolute/path.sock"):
        sel.check_endpoint(endpoint)


def test_endpoint_ok():
    assert sel.check_endpoint("unix:///run/crio/crio.sock") == "unix:///run/crio/crio.sock"
    assert sel.check_endpoint("") is None


# ---- the kubelet's endpoint ---------------------------------------------------------------------------------

def _put(root, path, text):
    full = os.path.join(str(root), path.lstrip("/"))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, "w") as fh:
        fh.write(text)


def test_no_kubelet(tmp_path):
    out = sel.kubelet_endpoint(str(tmp_path))
    assert out["installed"] is False and out["endpoint"] is None


def test_kubelet_config_endpoint(tmp_path):
    _put(tmp_path, "/var/lib/kubelet/config.yaml", fixture("kubelet-config-crio.yaml"))
    out = sel.kubelet_endpoint(str(tmp_path))
    assert out["installed"] and out["endpoint"] == "unix:///var/run/crio/crio.sock"
    assert out["source"] == "containerRuntimeEndpoint in /var/lib/kubelet/config.yaml"


def test_kubelet_default_endpoint(tmp_path):
    _put(tmp_path, "/var/lib/kubelet/config.yaml", fixture("kubelet-config-noendpoint.yaml"))
    out = sel.kubelet_endpoint(str(tmp_path))
    assert out["endpoint"] == "unix:///run/containerd/containerd.sock"
    assert "KubeletConfiguration default" in out["source"]


def test_kubeadm_flag_wins_over_the_config_file(tmp_path):
    # the kubelet: a command-line flag overrides the config file's value
    _put(tmp_path, "/var/lib/kubelet/config.yaml", fixture("kubelet-config-crio.yaml"))
    _put(tmp_path, "/var/lib/kubelet/kubeadm-flags.env", fixture("kubelet-kubeadm-flags.env"))
    _put(tmp_path, "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf", fixture("kubelet-10-kubeadm.conf"))
    out = sel.kubelet_endpoint(str(tmp_path))
    assert out["endpoint"] == "unix:///run/k3s/containerd/containerd.sock"
    assert out["source"].startswith("--container-runtime-endpoint=unix:///run/k3s/containerd/containerd.sock on kubelet.service's "
                                    "command line (ExecStart= of kubelet.service in ") and out["source"].endswith("kubeadm-flags.env)")


def test_dropin_config_flag_names_the_config_file(tmp_path):
    _put(tmp_path, "/etc/systemd/system/kubelet.service.d/20-config.conf",
         '[Service]\nEnvironment="KUBELET_CONFIG_ARGS=--config=/etc/kubernetes/kubelet.yaml"\n')
    _put(tmp_path, "/etc/kubernetes/kubelet.yaml", fixture("kubelet-config-crio.yaml"))
    out = sel.kubelet_endpoint(str(tmp_path))
    assert out["endpoint"] == "unix:///var/run/crio/crio.sock"
    assert out["source"] == "containerRuntimeEndpoint in /etc/kubernetes/kubelet.yaml (kubelet.service's --config)"


def test_execstart_bare_path_is_a_unix_socket(tmp_path):
    _put(tmp_path, "/etc/systemd/system/kubelet.service",
         "[Service]\nExecStart=/usr/bin/kubelet --container-runtime-endpoint /var/run/crio/crio.sock --v=2\n")
    out = sel.kubelet_endpoint(str(tmp_path))
    assert out["endpoint"] == "unix:///var/run/crio/crio.sock"


def test_unreadable_kubelet_config_is_said(tmp_path):
    _put(tmp_path, "/var/lib/kubelet/config.yaml", "kind: [unclosed\n")
    out = sel.kubelet_endpoint(str(tmp_path))
    assert out["endpoint"] is None and out["installed"] and "not understood" in out["errors"][0]
    [info] = sel.select_runtimes("auto", root=str(tmp_path))
    assert (info["name"], info["usable"], info["endpoint"]) == (None, False, None)
    assert info["reason"].startswith("the kubelet's CRI endpoint could not be known (unknown: kubelet config /var/lib/kubelet/config.yaml not understood")


# ---- auto, with fake engines on PATH --------------------------------------------------------------------------

_exe = write_exe  # tests/conftest.py has the bindir fixture (PATH = one empty directory)


def _docker(bindir, info_fixture=None):
    if info_fixture is None:
        _exe(bindir, "docker", 'echo "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker '
                               'daemon running?" >&2\nexit 1\n')
    else:
        shutil.copy(os.path.join(FIX, info_fixture), str(bindir / "info.json"))
        _exe(bindir, "docker", '/bin/cat "%s"\n' % (bindir / "info.json"))


def _podman(bindir):
    _exe(bindir, "podman", 'echo "4.3.1|runc|runc version 1.1.5+ds1|v2"\n')


@pytest.fixture()
def fake_cri(monkeypatch, tmp_path):
    """The CRI adapter's detection: what a containerd or CRI-O would answer to Version at an endpoint (a node's
    endpoint: one dialled under the test's root, tmp_path, is that node endpoint)."""
    answers = {}

    def cri_info(name, endpoint, timeout, descriptor=None):  # pylint: disable=unused-argument
        node = "unix://" + endpoint[len("unix://") + len(str(tmp_path)):] if (endpoint or "").startswith("unix://%s/" % tmp_path) else endpoint
        answer = answers.get(node)
        if answer is None:
            return {"name": name, "endpoint": endpoint, "usable": False, "version": None,
                    "reason": "connection refused at %s" % endpoint}
        return {"name": name, "endpoint": endpoint, "usable": True, "version": answer[1], "reason": None,
                "runtime_name": answer[0]}

    monkeypatch.setattr(sel, "cri_info", cri_info)
    return answers


def test_auto_kubelet_containerd(tmp_path, bindir, fake_cri):
    _docker(bindir, "docker-26.1.5-info-cdi.recorded.json")  # a running docker does not win over the kubelet
    _podman(bindir)
    _put(tmp_path, "/var/lib/kubelet/config.yaml", fixture("kubelet-config-noendpoint.yaml"))
    fake_cri["unix:///run/containerd/containerd.sock"] = ("containerd", "1.7.24")
    [info] = sel.select_runtimes("auto", root=str(tmp_path))
    assert info["name"] == "containerd" and info["usable"] and info["version"] == "1.7.24"
    # the node's endpoint; dialled under the test's root (the node's /)
    assert info["selection"]["endpoint"] == "unix:///run/containerd/containerd.sock"
    assert info["endpoint"] == "unix://%s/run/containerd/containerd.sock" % tmp_path
    why = info["selected_because"]
    assert "a kubelet is installed" in why and "KubeletConfiguration default" in why and "answered containerd 1.7.24" in why


def test_auto_engine_is_named_by_the_cri_answer_not_the_socket(tmp_path, bindir, fake_cri):
    _put(tmp_path, "/var/lib/kubelet/kubeadm-flags.env", fixture("kubelet-kubeadm-flags.env"))
    fake_cri["unix:///run/k3s/containerd/containerd.sock"] = ("cri-o", "1.33.2")
    [info] = sel.select_runtimes("auto", root=str(tmp_path))
    assert info["name"] == "crio" and "answered cri-o 1.33.2" in info["selected_because"]


def test_auto_kubelet_runtime_down_is_still_the_one(tmp_path, bindir, fake_cri):
    # the verdict speaks for the kubelet's runtime even when it does not answer: never another engine instead
    _podman(bindir)
    _put(tmp_path, "/var/lib/kubelet/config.yaml", fixture("kubelet-config-crio.yaml"))
    [info] = sel.select_runtimes("auto", root=str(tmp_path))
    assert info["name"] == "crio" and info["usable"] is False
    assert "did not answer the CRI Version call (connection refused" in info["selected_because"]


def test_auto_running_docker(tmp_path, bindir):
    _docker(bindir, "docker-26.1.5-info-cdi.recorded.json")
    _podman(bindir)
    [info] = sel.select_runtimes("auto", root=str(tmp_path))
    assert info["name"] == "docker" and info["usable"] and info["version"] == "26.1.5+dfsg1"
    assert "no kubelet installed" in info["selected_because"] and "a docker daemon is running" in info["selected_because"]


def test_auto_running_docker_without_cdi_is_docker(tmp_path, bindir):
    # CDI off on a docker host is a cdi FAIL for docker (cdi.engine.config), not a reason to verify podman
    _docker(bindir, "docker-26.1.5-info-nocdi.json")
    _podman(bindir)
    [info] = sel.select_runtimes("auto", root=str(tmp_path))
    assert info["name"] == "docker" and info["usable"] is False and "CDI disabled" in info["reason"]


def test_auto_docker_cli_whose_info_exits_0_without_a_daemon_gives_podman(tmp_path, bindir):
    # docker 26's docker info --format '{{json .}}' exits 0 with ServerErrors when no daemon answers (recorded)
    shutil.copy(os.path.join(FIX, "docker-26.1.5-info-nodaemon.recorded.json"), str(bindir / "info.json"))
    _exe(bindir, "docker", '/bin/cat "%s"\necho "Cannot connect to the Docker daemon" >&2\n' % (bindir / "info.json"))
    _podman(bindir)
    [info] = sel.select_runtimes("auto", root=str(tmp_path))
    assert info["name"] == "podman"
    assert "no running docker daemon (docker info failed: Cannot connect to the Docker daemon at " \
           "unix:///nonexistent/docker.sock. Is the docker daemon running?)" in info["selected_because"]


def test_auto_docker_cli_without_daemon_gives_podman(tmp_path, bindir):
    _docker(bindir)
    _podman(bindir)
    [info] = sel.select_runtimes("auto", root=str(tmp_path))
    assert info["name"] == "podman" and info["version"] == "4.3.1"
    assert "no running docker daemon (docker info failed: Cannot connect" in info["selected_because"]


def test_auto_nothing(tmp_path, bindir):
    [info] = sel.select_runtimes("auto", root=str(tmp_path))
    assert info["name"] is None and info["usable"] is False
    assert "no kubelet installed" in info["reason"] and "no docker CLI" in info["reason"] and "podman not found" in info["reason"]


def test_list_gives_one_per_name(tmp_path, bindir, fake_cri):
    _docker(bindir, "docker-26.1.5-info-cdi.recorded.json")
    fake_cri["unix:///run/containerd/containerd.sock"] = ("containerd", "2.1.4")
    infos = sel.select_runtimes(["containerd", "docker"], root=str(tmp_path))
    assert [i["name"] for i in infos] == ["containerd", "docker"]
    assert all(i["selected_because"].startswith("named in the runtime option") for i in infos)


def test_named_cri_engine_uses_the_given_endpoint(tmp_path, bindir, fake_cri):
    fake_cri["unix:///tmp/lab/containerd.sock"] = ("containerd", "1.7.24")
    [info] = sel.select_runtimes("containerd", endpoint="unix:///tmp/lab/containerd.sock", root=str(tmp_path))
    assert info["usable"] and info["endpoint"] == "unix:///tmp/lab/containerd.sock"


def test_cri_client_missing_is_said(tmp_path, bindir, monkeypatch):
    monkeypatch.setitem(sys.modules, "ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.cri_client", None)
    monkeypatch.delattr(sys.modules["ansible_collections.gpuprobe.layers.plugins.module_utils._runtime"], "cri_client", raising=False)
    [info] = sel.select_runtimes("containerd", root=str(tmp_path))
    assert info["usable"] is False and info["reason"].startswith("the CRI client cannot be loaded")


def test_engine_label():
    assert sel.engine_label({"name": "containerd", "version": "1.7.24", "endpoint": "unix:///run/c.sock"}) == \
        "containerd 1.7.24 (unix:///run/c.sock)"
    assert sel.engine_label({"name": "podman", "version": "4.3.1", "path": "/usr/bin/podman"}) == "podman 4.3.1 (/usr/bin/podman)"


def test_auto_with_an_endpoint_is_the_engine_there(tmp_path, bindir, fake_cri):
    _podman(bindir)
    fake_cri["unix:///run/k3s/containerd/containerd.sock"] = ("containerd", "1.7.24")
    [info] = sel.select_runtimes("auto", endpoint="unix:///run/k3s/containerd/containerd.sock", root=str(tmp_path))
    assert info["name"] == "containerd" and info["selected_because"] == (
        "runtime_endpoint unix:///run/k3s/containerd/containerd.sock was given; the CRI Version call there answered "
        "containerd 1.7.24")


def test_docker_is_asked_once_for_selection_and_its_cdi_configuration(tmp_path, bindir):
    # the detection's docker info answer is what cdi.engine.config judges: one call to the daemon, not two
    from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import engine as E  # pylint: disable=import-outside-toplevel
    shutil.copy(os.path.join(FIX, "docker-26.1.5-info-nocdi.json"), str(bindir / "info.json"))
    calls = bindir / "calls"
    _exe(bindir, "docker", 'echo "$*" >> "%s"\n/bin/cat "%s"\n' % (calls, bindir / "info.json"))
    [info] = sel.select_runtimes("docker", root=str(tmp_path))
    out = E.read_engine_config(info)
    assert calls.read_text().splitlines() == ["info --format {{json .}}"]
    assert out["enabled"] is False and "features.cdi" in out["reason"] and out["source"].endswith("info --format '{{json .}}'")
    # a dict without the detection's answer (an older record, another caller) still asks the daemon itself
    E.read_engine_config({"name": "docker", "path": info["path"], "version": "26.1.5"})
    assert len(calls.read_text().splitlines()) == 2


def test_the_inspect_stage_reads_podmans_version_only_and_leaves_podman_info_to_the_probe_stage(tmp_path, bindir):
    calls = bindir / "calls"
    _exe(bindir, "podman", 'echo "$*" >> "%s"\n[ "$1" = "--version" ] && echo "podman version 4.3.1" && exit 0\n'
                           'echo "4.3.1|runc|runc version 1.1.5+ds1|v2"\n' % calls)
    _docker(bindir)
    [info] = sel.select_runtimes("auto", root=str(tmp_path), inspect=True)
    assert calls.read_text().splitlines() == ["--version"]
    assert (info["name"], info["version"], info["usable"]) == ("podman", "4.3.1", None)
    assert "podman info not run in the inspect stage" in info["reason"] and "oci_runtime" not in info
    # the probe stage (no inspect flag) asks podman info: OCI runtime, cgroups, usable
    [full] = sel.select_runtimes("podman", root=str(tmp_path))
    assert calls.read_text().splitlines()[-1].startswith("info --format")
    assert (full["usable"], full["oci_runtime"], full["cgroups"]) == (True, "runc 1.1.5+ds1", "v2")


def test_the_inspect_stage_says_when_podman_does_not_answer_its_version(tmp_path, bindir):
    _exe(bindir, "podman", 'echo "Error: cannot exec" >&2; exit 125\n')
    [info] = sel.select_runtimes("podman", root=str(tmp_path), inspect=True)
    assert info["usable"] is False and info["reason"] == "podman --version failed: Error: cannot exec"
