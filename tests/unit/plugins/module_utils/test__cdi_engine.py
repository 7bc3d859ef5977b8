"""The engine's own CDI configuration as cdi-layer evidence (_cdi.engine, cdi.engine.config) and the TOML reader it
uses: recorded `containerd config dump` / `config default` outputs of containerd 1.7.24 (tests/unit/fixtures/engines,
README there), the shapes of containerd 2.x, `crio status config` and `docker info` from their sources, containers.conf;
read through fake engine executables on PATH where a command must run."""
import json
import os
import subprocess
import sys
import time

import pytest
from fakebin import write_exe  # tests/conftest.py puts tests/unit/fixtures/host on sys.path

from ansible_collections.gpuprobe.layers.plugins.module_utils._common import toml as _toml
from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import engine as E
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import FAIL, NOT_RUN, PASS

FIX = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "engines")


def text(name):
    with open(os.path.join(FIX, name)) as fh:
        return fh.read()


def doc(name):
    return _toml.loads(text(name))


# ---- TOML ----------------------------------------------------------------------------------------------------

def test_toml_reader_is_tomllib_or_tomli_and_errors_are_toml_errors():
    assert _toml.READER in ("tomllib", "tomli")
    assert _toml.loads('a = 1\n[t]\nk = ["x"]\n') == {"a": 1, "t": {"k": ["x"]}}
    for bad in ('a = 1\na = 2\n', 'a = "open\n', 'a = nope\n'):
        with pytest.raises(_toml.TomlError):
            _toml.loads(bad)


def test_a_node_without_a_toml_reader_reads_no_engine_configuration(monkeypatch, tmp_path):
    """Python < 3.11 without tomli: the configuration is not read, and the check says why (NOT_RUN, never a guess)."""
    monkeypatch.setattr(_toml, "_reader", None)
    monkeypatch.setattr(_toml, "READER", None)
    with pytest.raises(_toml.TomlError) as err:
        _toml.loads("a = 1\n")
    assert "tomli" in str(err.value) and "Python < 3.11" in str(err.value)
    conf = tmp_path / "containers.conf"
    conf.write_text('[engine]\ncdi_spec_dirs = ["/opt/cdi"]\n')
    out = E.read_podman({"name": "podman", "version": "5.5.0"}, environ={"CONTAINERS_CONF": str(conf)})
    assert out["enabled"] is None and out["spec_dirs"] in (None, []), out
    assert "not read" in out["reason"] and "tomli library is not installed" in out["reason"], out


# ---- containerd ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, enabled, dirs, section", [
    ("containerd-1.7.24-config-default.toml", False, ["/etc/cdi", "/var/run/cdi"], 'plugins."io.containerd.grpc.v1.cri"'),
    ("containerd-1.7.24-dump-disabled.toml", False, ["/etc/cdi", "/var/run/cdi"], 'plugins."io.containerd.grpc.v1.cri"'),
    ("containerd-1.7.24-dump-enabled-opt.toml", True, ["/opt/cdi"], 'plugins."io.containerd.grpc.v1.cri"'),
    ("containerd-1.7.24-dump-v1-enabled.toml", True, ["/etc/cdi", "/var/run/cdi"], 'plugins."io.containerd.grpc.v1.cri"'),
    ("containerd-2.x-dump-v3.toml", True, ["/etc/cdi", "/var/run/cdi"], 'plugins."io.containerd.cri.v1.runtime"'),
])
def test_containerd_dump(name, enabled, dirs, section):
    out = E.containerd_cdi(doc(name), "1.7.24")
    assert (out["enabled"], out["spec_dirs"], out["section"]) == (enabled, dirs, section)
    assert (out["reason"] is None) == enabled
    if not enabled:
        assert out["reason"] == "%s.enable_cdi = false" % section


@pytest.mark.parametrize("version, enabled", [("1.7.24", False), ("2.0.0", True), ("2.1.4", True), (None, None)])
def test_containerd_without_enable_cdi_takes_the_release_default(version, enabled):
    out = E.containerd_cdi({"version": 2, "plugins": {"io.containerd.grpc.v1.cri": {}}}, version)
    assert out["enabled"] is enabled
    if enabled is None:
        assert "cannot be told" in out["reason"]


def test_containerd_cri_plugin_disabled():
    d = doc("containerd-1.7.24-dump-enabled-opt.toml")
    d["disabled_plugins"] = ["io.containerd.grpc.v1.cri"]
    out = E.containerd_cdi(d, "1.7.24")
    assert out["enabled"] is False and "CRI plugin is disabled" in out["reason"]


@pytest.mark.parametrize("mutate, words", [
    (lambda d: d.update(version=7), "config version 7"),
    (lambda d: d["plugins"].pop("io.containerd.grpc.v1.cri"), "no plugins.\"io.containerd.grpc.v1.cri\" section"),
    (lambda d: d["plugins"]["io.containerd.grpc.v1.cri"].update(enable_cdi="yes"), "not a boolean"),
])
def test_containerd_not_understood_is_unknown(mutate, words):
    d = doc("containerd-1.7.24-dump-enabled-opt.toml")
    mutate(d)
    out = E.containerd_cdi(d, "1.7.24")
    assert out["enabled"] is None and words in out["reason"]


# ---- CRI-O, docker, podman --------------------------------------------------------------------------------------

def test_crio_status_config():
    out = E.crio_cdi(doc("crio-status-config.toml"))
    assert (out["enabled"], out["spec_dirs"], out["origin"]) == (True, ["/etc/cdi", "/opt/vendor/cdi"], "configured")


def test_crio_without_dirs_reads_the_library_defaults_and_without_runtime_table_is_unknown():
    assert E.crio_cdi({"crio": {"runtime": {}}})["spec_dirs"] == ["/etc/cdi", "/var/run/cdi"]
    assert E.crio_cdi({"crio": {}})["enabled"] is None


@pytest.mark.parametrize("name, enabled, dirs, words", [
    ("docker-26.1.5-info-cdi.recorded.json", True, ["/etc/cdi", "/var/run/cdi"], None),
    ("docker-26.1.5-info-nocdi.json", False, [], "CDISpecDirs is empty"),
    ("docker-24.0.7-info.json", False, None, "no CDI before docker 25"),
])
def test_docker_info(name, enabled, dirs, words):
    out = E.docker_cdi(json.loads(text(name)))
    assert (out["enabled"], out["spec_dirs"]) == (enabled, dirs)
    assert words is None or words in out["reason"]


def test_docker_info_without_the_field_and_an_unknown_version_is_unknown():
    assert E.docker_cdi({"ServerVersion": "dev"})["enabled"] is None


@pytest.mark.parametrize("version, dirs, origin", [
    ("5.5.0", ["/opt/cdi", "/var/run/cdi"], "configured"),
    ("4.3.1", ["/etc/cdi", "/var/run/cdi"], "default: podman 4.3.1 ignores the configured cdi_spec_dirs /opt/cdi, /var/run/cdi"),
])
def test_podman_containers_conf(version, dirs, origin):
    out = E.podman_cdi([doc("containers-5.5-cdi.conf")], version, "containers.conf")
    assert out["spec_dirs"] == dirs and out["origin"].startswith(origin)


def test_podman_unknown_version_with_configured_dirs_is_unknown():
    out = E.podman_cdi([doc("containers-5.5-cdi.conf")], "unknown", "containers.conf")
    assert out["spec_dirs"] is None and "honoured from podman 5.5.0 only" in out["reason"]


def test_podman_later_file_overrides(tmp_path):
    out = E.podman_cdi([doc("containers-5.5-cdi.conf"), {"engine": {"cdi_spec_dirs": ["/x"]}}], "5.6.0", "c")
    assert out["spec_dirs"] == ["/x"]


# ---- the check -------------------------------------------------------------------------------------------------

FILES = [{"path": "/etc/cdi/a.yaml", "ok": True, "kind": "k.example.com/gpu", "devices": ["0"]},
         {"path": "/opt/cdi/b.yaml", "ok": True, "kind": "k.example.com/x", "devices": ["1"]}]
SOURCES = {"k.example.com/gpu=0": "/etc/cdi/a.yaml", "k.example.com/x=1": "/opt/cdi/b.yaml"}


def engine(name, cfg, version="1.7.24"):
    return {"name": name, "version": version, "endpoint": "unix:///run/containerd/containerd.sock", "cdi_config": cfg}


def statuses(checks):
    return [(c["subject"].split(": ")[-1], c["status"]) for c in checks]


def test_check_spec_in_a_dir_the_engine_does_not_read_fails():
    cfg = E.containerd_cdi(doc("containerd-1.7.24-dump-v1-enabled.toml"), "1.7.24")
    checks = E.engine_checks([engine("containerd", cfg)], FILES, SOURCES, sorted(SOURCES))
    assert statuses(checks) == [("k.example.com/gpu=0", PASS), ("k.example.com/x=1", FAIL)]
    assert "/opt/cdi/b.yaml is in /opt/cdi, which containerd does not read: it reads /etc/cdi, /var/run/cdi" in checks[1]["observed"]
    assert checks[1]["hint"] and checks[0]["subject"].startswith("containerd 1.7.24 (unix:///run/containerd/containerd.sock): ")


def test_check_configured_dirs_count():
    cfg = E.containerd_cdi(doc("containerd-1.7.24-dump-enabled-opt.toml"), "1.7.24")
    checks = E.engine_checks([engine("containerd", cfg)], FILES, SOURCES, sorted(SOURCES))
    assert statuses(checks) == [("k.example.com/gpu=0", FAIL), ("k.example.com/x=1", PASS)]


def test_check_cdi_off_fails_before_any_device():
    cfg = E.containerd_cdi(doc("containerd-1.7.24-config-default.toml"), "1.7.24")
    [check] = E.engine_checks([engine("containerd", cfg)], FILES, SOURCES, sorted(SOURCES))
    assert check["status"] == FAIL and "CDI is off" in check["observed"] and "enable_cdi = false" in check["observed"]


def test_check_unknown_configuration_is_not_run_never_pass():
    [check] = E.engine_checks([engine("containerd", {"enabled": None, "reason": "not found", "source": "x"})],
                              FILES, SOURCES, sorted(SOURCES))
    assert check["status"] == NOT_RUN and "unknown: not found" in check["observed"]


def test_check_no_runtime_selected_is_not_run():
    [check] = E.engine_checks([{"name": None, "reason": "no usable container runtime"}], FILES, SOURCES, [])
    assert check["status"] == NOT_RUN and check["observed"] == "no usable container runtime"


def test_check_without_a_request_says_what_the_engine_reads():
    cfg = E.docker_cdi(json.loads(text("docker-26.1.5-info-cdi.recorded.json")))
    [check] = E.engine_checks([engine("docker", cfg, "26.1.5")], FILES, SOURCES, [])
    assert check["status"] == PASS and "reads /etc/cdi, /var/run/cdi (daemon" in check["observed"]


def test_describe_names_the_cdi_library():
    info = E.describe({"name": "containerd", "version": "1.7.24", "endpoint": "unix:///run/c.sock"})
    assert info["cdi_library"]["library"] == "v0.7.2" and info["cdi_library"]["max_readable"] == "0.7.0"
    assert info["label"] == "containerd 1.7.24 (unix:///run/c.sock)"


# ---- reading the running engine (fake executables; a process named containerd) ----------------------------------

_exe = write_exe  # tests/conftest.py has the bindir fixture (PATH = one empty directory)


def test_read_containerd_finds_the_daemon_serving_the_endpoint(tmp_path, bindir):
    config = tmp_path / "config.toml"
    config.write_text('version = 2\n[grpc]\n  address = "%s/c.sock"\n' % tmp_path)
    dump = tmp_path / "dump.toml"
    dump.write_text(text("containerd-1.7.24-dump-enabled-opt.toml").replace(
        'address = "/run/containerd/containerd.sock"', 'address = "%s/c.sock"' % tmp_path))
    # `containerd --config <file> config dump` prints the recorded dump when asked for this daemon's file
    _exe(bindir, "containerd", 'if [ "$2" = "%s" ] && [ "$3 $4" = "config dump" ]; then /bin/cat "%s"; exit 0; fi\n'
                               'echo "containerd: failed to load TOML: $2: open $2: no such file or directory" >&2; exit 1\n'
         % (config, dump))
    # a process whose argv[0] is "containerd", started with --config as the daemon is
    proc = subprocess.Popen(["/bin/bash", "-c", 'exec -a containerd %s -c "import time; time.sleep(30)" --config %s' % (
        sys.executable, config)])
    try:
        for _attempt in range(50):
            with open("/proc/%d/cmdline" % proc.pid, "rb") as fh:
                if fh.read().startswith(b"containerd\0"):
                    break
            time.sleep(0.05)
        out = E.read_engine_config({"name": "containerd", "version": "1.7.24", "endpoint": "unix://%s/c.sock" % tmp_path})
        assert (out["enabled"], out["spec_dirs"]) == (True, ["/opt/cdi"])
        assert out["source"].endswith("--config %s config dump" % config)
        other = E.read_engine_config({"name": "containerd", "version": "1.7.24", "endpoint": "unix:///nowhere.sock"})
        assert other["enabled"] is None and "the configuration of the containerd serving /nowhere.sock was not found" in other["reason"]
    finally:
        proc.kill()
        proc.wait()


def test_read_crio_status_config(bindir):
    _exe(bindir, "crio", '[ "$1 $2 $3 $4" = "status --socket /var/run/crio/crio.sock config" ] && /bin/cat "%s"\n'
         % os.path.join(FIX, "crio-status-config.toml"))
    out = E.read_engine_config({"name": "crio", "endpoint": "unix:///var/run/crio/crio.sock"})
    assert out["spec_dirs"] == ["/etc/cdi", "/opt/vendor/cdi"] and out["source"].endswith("status --socket /var/run/crio/crio.sock config")


def test_read_crio_failure_is_unknown(bindir):
    _exe(bindir, "crio", 'echo "connect: no such file or directory" >&2; exit 1\n')
    out = E.read_engine_config({"name": "crio", "endpoint": "unix:///var/run/crio/crio.sock"})
    assert out["enabled"] is None and "connect: no such file or directory" in out["reason"]


def test_read_docker_info(bindir):
    path = _exe(bindir, "docker", '/bin/cat "%s"\n' % os.path.join(FIX, "docker-26.1.5-info-nocdi.json"))
    out = E.read_engine_config({"name": "docker", "path": path, "version": "26.1.5"})
    assert out["enabled"] is False and "features.cdi" in out["reason"]


def test_read_podman_containers_conf_env(tmp_path):
    conf = tmp_path / "containers.conf"
    conf.write_text(text("containers-5.5-cdi.conf"))
    out = E.read_engine_config({"name": "podman", "version": "4.3.1"}, environ={"CONTAINERS_CONF": str(conf)})
    assert out["spec_dirs"] == ["/etc/cdi", "/var/run/cdi"] and "ignores the configured cdi_spec_dirs" in out["origin"]
    bad = tmp_path / "bad.conf"
    bad.write_text("[engine\n")
    out = E.read_engine_config({"name": "podman", "version": "5.5.0"}, environ={"CONTAINERS_CONF": str(bad)})
    assert out["enabled"] is None and "not read" in out["reason"]


def test_read_docker_asks_the_daemon_it_was_detected_at(bindir, tmp_path):
    # the fake CLI answers only for the socket given as DOCKER_HOST
    path = _exe(bindir, "docker", '[ "$DOCKER_HOST" = "unix://%s/d.sock" ] && /bin/cat "%s" || exit 1\n'
                % (tmp_path, os.path.join(FIX, "docker-26.1.5-info-cdi.recorded.json")))
    info = {"name": "docker", "path": path, "version": "26.1.5", "env": {"DOCKER_HOST": "unix://%s/d.sock" % tmp_path}}
    out = E.read_engine_config(info)
    assert out["enabled"] is True and out["source"].startswith("DOCKER_HOST=unix://%s/d.sock " % tmp_path)
