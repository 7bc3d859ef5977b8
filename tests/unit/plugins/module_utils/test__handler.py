"""The running engine's configuration over its file (_cdi.engine_live) and the runtime handler and injector
(_runtime.handler), from answers RECORDED from a real containerd 1.7.24 (tests/unit/fixtures/engines/live, capture.py
there): CRI Status (verbose) of a daemon started with CDI off and then its file edited to on, the mirror case, and GPU
Operator's three handlers; CRI-O and docker from the fixtures of tests/unit/fixtures/engines (README there)."""
import json
import os

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils._common import toml as _toml
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import engine_live as L
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import NOT_RUN, PASS, WARN
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import handler as H

FIX = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "engines")
LIVE = os.path.join(FIX, "live")
OPERATOR_ROOT = os.path.join(LIVE, "gpu-operator-root")
TOOLKIT = "/usr/local/nvidia/toolkit"


def read(*parts):
    with open(os.path.join(*parts)) as fh:
        return fh.read()


def live(name):
    """containerd_live of a recorded CRI Status (verbose) answer, through trim_cri_config as the detection keeps it."""
    status = json.loads(read(LIVE, name))
    return L.containerd_live(H.trim_cri_config(L.status_config(status)), "CRI Status (verbose) at unix:///x.sock")


def engine(cfg, name="containerd"):
    return {"name": name, "version": "1.7.24", "endpoint": "unix:///x.sock", "cdi_config": cfg}


# ---- containerd's live configuration ------------------------------------------------------------------------

def test_the_running_daemon_says_cdi_off_though_its_file_was_edited_to_on():
    status_before = json.loads(read(LIVE, "containerd-1.7.24-status-cdi-off.json"))
    status_after = json.loads(read(LIVE, "containerd-1.7.24-status-cdi-off-after-edit.json"))
    assert L.status_config(status_before)["enableCDI"] is False
    assert L.status_config(status_after)["enableCDI"] is False       # the daemon read its file once, at start
    cfg = live("containerd-1.7.24-status-cdi-off-after-edit.json")
    assert (cfg["enabled"], cfg["spec_dirs"], cfg["default_handler"]) == (False, ["/etc/cdi", "/var/run/cdi"], "runc")
    assert "enableCDI is false in the running containerd" in cfg["reason"]
    second = cfg["handlers"]["gpuprobe-second"]
    assert second["binary"] == "/tmp/gpuprobe-capture/cdi-off/gpuprobe-second"
    assert (second["runtime_type"], second["container_annotations"]) == ("io.containerd.runc.v2", ["cdi.k8s.io/*"])
    # what the file says now (config dump of the edited file): CDI on
    file_doc = _toml.loads(read(LIVE, "containerd-1.7.24-dump-edited-on.toml"))
    file_side = dict(L.containerd_file(file_doc), enabled=True, spec_dirs=["/etc/cdi", "/var/run/cdi"])
    assert L.disagreements(file_side, cfg) == [("CDI enabled", True, False)]


def test_the_mirror_case_daemon_on_file_off():
    cfg = live("containerd-1.7.24-status-cdi-on.json")
    assert cfg["enabled"] is True and cfg["reason"] is None
    file_doc = _toml.loads(read(LIVE, "containerd-1.7.24-dump-edited-off.toml"))
    assert file_doc["plugins"]["io.containerd.grpc.v1.cri"]["enable_cdi"] is False
    assert L.disagreements(dict(L.containerd_file(file_doc), enabled=False), cfg) == [("CDI enabled", False, True)]


def test_trim_keeps_only_what_is_read_and_survives_junk():
    full = L.status_config(json.loads(read(LIVE, "containerd-1.7.24-status-gpu-operator.json")))
    trimmed = H.trim_cri_config(full)
    assert set(trimmed) == {"enableCDI", "cdiSpecDirs", "sandboxImage", "containerd"}
    assert len(json.dumps(trimmed)) < len(json.dumps(full)) / 3
    assert H.trim_cri_config(None) == {} and H.trim_cri_config({"containerd": {"runtimes": {"x": "junk"}}})["containerd"]["runtimes"] == {}
    with pytest.raises(ValueError):
        L.status_config({"info": {}})
    assert L.containerd_live({}, "s")["enabled"] is None
    assert "not a boolean" in L.containerd_live({"enableCDI": "yes"}, "s")["reason"]


def test_file_check_warns_naming_both_values_and_sources():
    cfg = live("containerd-1.7.24-status-cdi-off.json")
    cfg["file"] = {"source": "containerd --config /etc/containerd/config.toml config dump", "enabled": True,
                   "spec_dirs": ["/etc/cdi", "/var/run/cdi"], "default_handler": "runc"}
    cfg["disagreements"] = L.disagreements(cfg["file"], cfg)
    [check] = L.file_checks(engine(cfg))
    assert check["status"] == WARN and check["id"] == "cdi.engine.file"
    assert "CDI enabled: the file says on (containerd --config /etc/containerd/config.toml config dump), the running " \
           "daemon off (CRI Status (verbose) at unix:///x.sock)" in check["observed"]
    assert check["observed"].endswith("the verdict follows the running daemon")
    cfg["file"]["enabled"] = False
    cfg["disagreements"] = L.disagreements(cfg["file"], cfg)
    assert [c["status"] for c in L.file_checks(engine(cfg))] == [PASS]
    cfg["file"] = {"source": "containerd config dump", "enabled": None, "reason": "no containerd process found"}
    assert [c["status"] for c in L.file_checks(engine(cfg))] == [NOT_RUN]
    assert L.file_checks(engine({"enabled": True, "live": False})) == []


def test_handler_binaries_that_differ_are_named():
    assert L.disagreements({"handlers": {"nvidia": {"binary": "/a"}, "runc": {"binary": "/r"}}},
                           {"handlers": {"nvidia": {"binary": "/b"}, "runc": {"binary": "/r"}}}) == [
        ("handler nvidia's binary", "/a", "/b")]
    assert L.disagreements({"handlers": {"runc": {}}}, {"handlers": {"runc": {}, "x": {}}}) == [("handlers", ["runc"], ["runc", "x"])]


def test_dockers_builtin_runtimes_are_no_disagreement():
    """Issue 44 item 7: docker info lists the runtimes dockerd registers itself (runc, io.containerd.runc.v2) beside
    daemon.json's: the recorded docker 26.1.5 against the lab's daemon.json agree; a runtime really missing from the
    running daemon, or one it has that the file does not name, is still said."""
    with open(os.path.join(FIX, "docker-26.1.5-info-cdi.recorded.json")) as fh:
        live = L.docker_handlers(json.load(fh))
    assert sorted(live["handlers"]) == ["gpuprobe-runc", "io.containerd.runc.v2", "runc"]
    side = L.docker_file({"default-runtime": "gpuprobe-runc", "runtimes": {"gpuprobe-runc": {"path": "/usr/sbin/runc"}}}, "daemon.json")
    assert L.disagreements(side, live) == []
    side = L.docker_file({"runtimes": {"gpuprobe-runc": {"path": "/usr/sbin/runc"}, "nvidia": {"path": "/usr/bin/nvidia-container-runtime"}}}, "d")
    assert L.disagreements(side, live) == [("handlers", ["gpuprobe-runc", "nvidia"], ["gpuprobe-runc"])]
    side = L.docker_file({"runtimes": {}}, "d")
    assert L.disagreements(side, live) == [("handlers", [], ["gpuprobe-runc"])]


def test_nri_listening_and_connected_plugins_from_proc_net_unix(tmp_path):
    table = tmp_path / "unix"
    table.write_text(
        "Num       RefCount Protocol Flags    Type St Inode Path\n"
        "0000000040a54591: 00000002 00000000 00010000 0001 01 1083542 /var/run/nri/nri.sock\n"
        "000000003d7792a4: 00000003 00000000 00000000 0001 03 1108209 /var/run/nri/nri.sock\n"
        "000000003d7792a5: 00000003 00000000 00000000 0001 03 1108210\n")
    out = L.nri_live({"enabled": True, "socket_path": "/var/run/nri/nri.sock", "plugin_path": str(tmp_path / "none")}, str(table))
    assert (out["listening"], out["plugins_connected"], out["plugins_installed"]) == (True, 1, [])
    assert L.nri_live(None) is None
    assert L.nri_live({"enabled": True, "socket_path": "/x"}, str(tmp_path / "absent"))["listening"] is None


def test_nri_section_of_the_recorded_dump():
    nri = L.containerd_file(_toml.loads(read(LIVE, "containerd-1.7.24-dump-edited-on.toml")))["nri"]
    assert nri == {"enabled": True, "socket_path": "/tmp/gpuprobe-capture/cdi-off/nri.sock",
                   "plugin_path": "/tmp/gpuprobe-capture/cdi-off/nri-plugins"}
    assert L.containerd_file(_toml.loads(read(LIVE, "containerd-1.7.24-dump-edited-off.toml")))["nri"]["enabled"] is False


# ---- CRI-O and docker -------------------------------------------------------------------------------------------

def test_crio_handlers_from_its_status_config():
    out = L.crio_handlers(_toml.loads(read(FIX, "crio-status-config.toml")))
    assert out["default_handler"] == "crun"
    assert out["handlers"]["crun"]["binary"] == "/usr/bin/crun"
    assert out["nri"]["enabled"] is True


def test_docker_handlers_and_its_daemon_json():
    info = json.loads(read(FIX, "docker-26.1.5-info-cdi.recorded.json"))
    out = L.docker_handlers(info)
    assert out["default_handler"] == "gpuprobe-runc" and out["handlers"]["gpuprobe-runc"]["binary"] == "/usr/sbin/runc"
    f = L.docker_file({"features": {"cdi": False}, "default-runtime": "gpuprobe-runc"}, "/etc/docker/daemon.json")
    assert L.disagreements(f, {"enabled": True, "default_handler": "gpuprobe-runc"}) == [("CDI enabled", False, True)]
    assert L.dockerd_config_file(["dockerd", "--config-file", "/d.json"]) == "/d.json"
    assert L.dockerd_config_file(["dockerd", "--config-file=/e.json"]) == "/e.json"
    assert L.dockerd_config_file(["dockerd"]) == "/etc/docker/daemon.json"


# ---- the handler and the injector -----------------------------------------------------------------------------

def test_default_handler_from_the_live_config_and_the_engine_injects():
    cfg = live("containerd-1.7.24-status-cdi-on.json")
    h = H.choose(engine(cfg))
    assert (h["name"], h["request"], h["source"], h["known"]) == ("runc", "", "default", True)
    assert "the engine's default handler runc" in h["why"]
    assert h["injector"]["by"] == "engine" and "enableCDI true" in h["injector"]["what"]


def test_option_names_the_handler_sent_in_the_request():
    cfg = live("containerd-1.7.24-status-cdi-off.json")
    h = H.choose(engine(cfg), option="gpuprobe-second")
    assert (h["name"], h["request"], h["source"], h["known"]) == ("gpuprobe-second", "gpuprobe-second", "option", True)
    assert h["binary"] == "/tmp/gpuprobe-capture/cdi-off/gpuprobe-second"
    assert h["injector"] is None and h["injectors"] == []         # CDI off, and the binary is not NVIDIA's runtime


def test_an_unknown_handler_is_kept_and_named_unknown():
    h = H.choose(engine(live("containerd-1.7.24-status-cdi-on.json")), option="nvidia-cdi")
    assert (h["request"], h["known"], h["binary"]) == ("nvidia-cdi", False, None)
    assert "the engine has no handler nvidia-cdi (it has runc)" in h["why"]


def test_gpu_operator_three_handlers_and_the_nvidia_runtime_in_cdi_mode():
    cfg = live("containerd-1.7.24-status-gpu-operator.json")
    assert (cfg["default_handler"], cfg["enabled"]) == ("nvidia", False)
    assert sorted(cfg["handlers"]) == ["nvidia", "nvidia-cdi", "nvidia-legacy", "runc"]
    eng = engine(cfg)
    # the default (nvidia): containerd's CDI is off, the runtime's config.toml says mode = "cdi", the annotation passes
    h = H.choose(eng, root=OPERATOR_ROOT)
    assert (h["name"], h["binary"]) == ("nvidia", TOOLKIT + "/nvidia-container-runtime")
    assert h["nvidia_runtime"]["config"] == TOOLKIT + "/.config/nvidia-container-runtime/config.toml"
    assert "NVIDIA_CTK_CONFIG_FILE_PATH in the wrapper script" in h["nvidia_runtime"]["config_from"]
    assert h["injector"]["by"] == "nvidia-runtime" and "in cdi mode (mode in %s" % h["nvidia_runtime"]["config"] in h["injector"]["what"]
    # nvidia-cdi: the binary forces cdi mode
    h = H.choose(eng, option="nvidia-cdi", root=OPERATOR_ROOT)
    assert h["injector"]["by"] == "nvidia-runtime" and "forces it" in h["injector"]["what"]
    # nvidia-legacy: the legacy hook, not CDI: no injector, and a note says why
    h = H.choose(eng, option="nvidia-legacy", root=OPERATOR_ROOT)
    assert h["injector"] is None and "legacy mode" in h["notes"][0]
    # the same handlers with containerd's CDI on: the engine acts first, the NVIDIA runtime after it
    h = H.choose(engine(dict(cfg, enabled=True)), option="nvidia-cdi", root=OPERATOR_ROOT)
    assert [i["by"] for i in h["injectors"]] == ["engine", "nvidia-runtime"]
    assert "CDI devices injected by containerd's CDI" in H.summary(h)


def test_the_nvidia_runtime_does_not_see_an_annotation_containerd_does_not_pass(tmp_path):
    cfg = live("containerd-1.7.24-status-gpu-operator.json")
    cfg["handlers"]["nvidia-cdi"]["container_annotations"] = []
    h = H.choose(engine(cfg), option="nvidia-cdi", root=OPERATOR_ROOT)
    assert h["injector"] is None and "container_annotations do not pass it" in h["notes"][0]
    # no config file at all: the runtime's default mode (auto) and prefixes
    nv = H.nvidia_runtime("/usr/bin/nvidia-container-runtime", root=str(tmp_path))
    assert (nv["config"], nv["mode"], nv["config_from"]) == ("/etc/nvidia-container-runtime/config.toml", "auto", "the default path")
    assert H.nvidia_runtime("/usr/sbin/runc") is None
    assert H.nvidia_config_path("/x", {"XDG_CONFIG_HOME": "/cfg"}) == (
        "/cfg/nvidia-container-runtime/config.toml", "XDG_CONFIG_HOME in the engine's environment")


def test_k8s_gpu_pods_choose_the_handler_and_the_option_overrides_it():
    cfg = live("containerd-1.7.24-status-gpu-operator.json")
    k8s = {"node": "gpu-1", "gpu_pods": [
        {"name": "a", "on_this_node": True, "runtime_class": "nvidia-cdi", "handler": "nvidia-cdi"},
        {"name": "b", "on_this_node": True, "runtime_class": "nvidia-cdi", "handler": "nvidia-cdi"},
        {"name": "c", "on_this_node": True, "runtime_class": None, "handler": ""},
        {"name": "d", "on_this_node": False, "runtime_class": "nvidia-legacy", "handler": "nvidia-legacy"}]}
    h = H.choose(engine(cfg), k8s=k8s, root=OPERATOR_ROOT)
    assert (h["name"], h["request"], h["source"]) == ("nvidia-cdi", "nvidia-cdi", "k8s")
    assert h["why"] == "2 of the 3 GPU Pod(s) on this node run with runtimeClassName -> handler nvidia-cdi; others use " \
                       "the default (1), not verified by this probe"
    h = H.choose(engine(cfg), option="nvidia-legacy", k8s=k8s, root=OPERATOR_ROOT)
    assert h["name"] == "nvidia-legacy" and "the k8s layer saw another on this node" in h["why"]
    # GPU Pods without runtimeClassName: the default handler, and the request carries "" as the kubelet's does
    h = H.choose(engine(cfg), k8s={"gpu_pods": [{"on_this_node": True, "handler": ""}]}, root=OPERATOR_ROOT)
    assert (h["name"], h["request"], h["source"]) == ("nvidia", "", "k8s")
    h = H.choose(engine(cfg), k8s={"error": "forbidden"})
    assert h["source"] == "default" and "could not read them (forbidden)" in h["why"]


def test_docker_takes_no_handler_option():
    h = H.choose({"name": "docker", "cdi_config": {"enabled": True, "spec_dirs": ["/etc/cdi"], "default_handler": "runc",
                                                   "handlers": {"runc": {"binary": "runc"}}}}, option="nvidia")
    assert (h["name"], h["request"], h["source"]) == ("runc", "", "default")
    assert "applies to the CRI engines only" in h["why"] and h["injector"]["by"] == "engine"


def test_the_selection_sentence_names_the_handler_and_why():
    from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import why  # pylint: disable=import-outside-toplevel
    cfg = live("containerd-1.7.24-status-gpu-operator.json")
    sel = {"runtime": "containerd 1.7.24 at unix:///run/containerd/containerd.sock", "handler": None,
           "why": ["the CRI endpoint of the running kubelet (pid 1): --container-runtime-endpoint"]}
    info = dict(engine(cfg), selection=dict(sel, sentence=why.sentence(sel)), selected_because=why.sentence(sel))
    H.attach(info, "nvidia-cdi", root=OPERATOR_ROOT)
    assert info["selected_because"] == info["selection"]["sentence"] == (
        "containerd 1.7.24 at unix:///run/containerd/containerd.sock, handler nvidia-cdi (verify_probe_runtime_handler), "
        "the CRI endpoint of the running kubelet (pid 1): --container-runtime-endpoint")
    H.attach(info, None, {"gpu_pods": [{"on_this_node": True, "handler": "nvidia"}]}, root=OPERATOR_ROOT)   # chosen again
    assert ", handler nvidia (the GPU Pods' RuntimeClass on this node), the CRI endpoint" in info["selected_because"]
    named = dict(engine(cfg), selected_because="named in the runtime option")
    H.attach(named, root=OPERATOR_ROOT)
    H.attach(named, root=OPERATOR_ROOT)
    assert named["selected_because"] == "named in the runtime option; the probe's handler: nvidia (the engine's default)"
    docker = {"name": "docker", "selected_because": "a docker daemon is running", "cdi_config": {"enabled": True}}
    H.attach(docker)
    assert docker["selected_because"] == "a docker daemon is running"


def test_crio_oci_hook_per_toolkit_mode():
    """Issue 44 item 9: CRI-O runs the OCI hooks of its hooks_dir (from its running configuration). The toolkit's
    legacy hook (oci-nvidia-hook.json) is read and named beside CRI-O's CDI, not as the probe's injector; in CDI mode
    (no NVIDIA hook) nothing is named."""
    doc = _toml.loads(read(FIX, "crio-status-config.toml"))
    cfg = dict(L.crio_handlers(doc), enabled=True, spec_dirs=["/etc/cdi"], source="crio status config")
    assert cfg["hooks_dirs"] == ["/usr/share/containers/oci/hooks.d"]
    engine = {"name": "crio", "cdi_config": cfg}
    legacy = os.path.join(LIVE, "crio-hooks", "legacy")
    h = H.choose(engine, root=legacy)
    assert h["injector"]["by"] == "engine" and [i["by"] for i in h["injectors"]] == ["engine"]
    [note] = [n for n in h["notes"] if "OCI hook" in n]
    assert note.startswith("NVIDIA's OCI hook /usr/bin/nvidia-container-toolkit (/usr/share/containers/oci/hooks.d/"
                           "oci-nvidia-hook.json: when always, prestart; the toolkit's legacy mode)"), note
    assert H.oci_hooks(cfg["hooks_dirs"], os.path.join(LIVE, "crio-hooks", "cdi")) == []
    assert not [n for n in H.choose(engine, root=os.path.join(LIVE, "crio-hooks", "cdi"))["notes"] if "OCI hook" in n]
