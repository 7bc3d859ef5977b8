"""The template containerd's configuration is regenerated from (issue 44 item 6), read as a file: the keys it sets (Go
template actions left out, k3s's base noted), MicroK8s' ${VAR} substitution, and the difference with the running
daemon, else with the generated file. tests/integration/test_engine_templates_containerd.py has a real containerd."""
import os

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import engine_template as T
from ansible_collections.gpuprobe.layers.plugins.module_utils._common.result import NOT_RUN, PASS, WARN

CRI = 'plugins."io.containerd.grpc.v1.cri"'
GENERATED = ('version = 2\n[%s]\n  enable_cdi = true\n[%s.containerd]\n  default_runtime_name = "runc"\n'
             '[%s.containerd.runtimes.runc]\n  runtime_type = "io.containerd.runc.v2"\n' % (CRI, CRI, CRI))


def _put(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_no_template_no_comparison(tmp_path):
    assert T.compare(_put(tmp_path, "config.toml", GENERATED), None, {}) is None
    assert T.find(str(tmp_path / "other.toml")) == (None, None)


def test_a_full_template_against_the_generated_file_when_no_daemon_answered(tmp_path):
    config = _put(tmp_path, "config.toml", GENERATED)
    _put(tmp_path, "config.toml.tmpl", GENERATED.replace("enable_cdi = true", "enable_cdi = false")
         .replace('[%s.containerd.runtimes.runc]\n  runtime_type = "io.containerd.runc.v2"\n' % CRI, ""))
    from ansible_collections.gpuprobe.layers.plugins.module_utils._common import toml  # pylint: disable=import-outside-toplevel
    out = T.compare(config, None, toml.loads(GENERATED))
    assert out["against"] == "the generated file" and out["differences"] == [
        ("CDI enabled", False, None, True), ("handler runc", None, None, "io.containerd.runc.v2")]
    [check] = T.checks({"name": "containerd", "version": "1.7.24", "cdi_config": {"template": out}})
    assert check["status"] == WARN and "handler runc: the template says no such handler, the running daemon unknown" in check["observed"]


def test_k3s_base_is_compared_on_what_it_adds(tmp_path):
    config = _put(tmp_path, "config.toml", GENERATED)
    _put(tmp_path, "config-v3.toml.tmpl", '{{ template "base" . }}\n{{ if .NodeConfig.AgentConfig.Snapshotter }}\n{{ end }}\n'
         '[%s.containerd.runtimes."nvidia".options]\n  BinaryName = "/usr/bin/nvidia-container-runtime"\n' % CRI)
    live = {"enabled": True, "spec_dirs": ["/etc/cdi"], "default_handler": "runc",
            "handlers": {"runc": {"binary": None, "runtime_type": "io.containerd.runc.v2"},
                         "nvidia": {"binary": "/usr/bin/nvidia-container-runtime"}}}
    out = T.compare(config, live, {})
    assert (out["kind"], out["base"], out["differences"], os.path.basename(out["template"])) == ("go", True, [], "config-v3.toml.tmpl")
    assert T.checks({"name": "containerd", "cdi_config": {"template": out}})[0]["status"] == PASS
    del live["handlers"]["nvidia"]
    assert T.compare(config, live, {})["differences"] == [("handler nvidia", "/usr/bin/nvidia-container-runtime", None, None)]


def test_microk8s_variables(tmp_path):
    args = tmp_path / "7229" / "args"
    args.mkdir(parents=True)
    config = _put(args, "containerd.toml", GENERATED)
    _put(args, "containerd-template.toml", GENERATED.replace('"runc"', '"${RUNTIME}"', 1)
         .replace("enable_cdi = true", 'enable_cdi = true\n  cdi_spec_dirs = ["${SNAP_DATA}/cdi", "${UNKNOWN}/cdi"]'))
    live = {"enabled": True, "spec_dirs": [str(tmp_path / "7229" / "cdi"), "/x/cdi"], "default_handler": "runc",
            "handlers": {"runc": {"runtime_type": "io.containerd.runc.v2"}}}
    # a list with a variable the wrapper does not substitute is compared as written: said, not guessed
    out = T.compare(config, live, {})
    assert out["kind"] == "snap" and [d[0] for d in out["differences"]] == ["CDI spec dirs"]
    (tmp_path / "7229" / "var" / "lock").mkdir(parents=True)
    (tmp_path / "7229" / "var" / "lock" / "gpu").write_text("")
    assert ("default handler", "nvidia-container-runtime", "runc", None) in T.compare(config, live, {})["differences"]
    assert T._same("${X}-v2", "io-v2") and not T._same("${X}-v2", "io-v3")  # pylint: disable=protected-access


def test_a_template_that_is_not_toml_is_not_run(tmp_path):
    config = _put(tmp_path, "config.toml", GENERATED)
    _put(tmp_path, "config.toml.tmpl", "[unclosed\n")
    out = T.compare(config, {}, {})
    [check] = T.checks({"name": "containerd", "cdi_config": {"template": out}})
    assert check["status"] == NOT_RUN and "not understood as TOML once its template actions are left out" in check["observed"]
