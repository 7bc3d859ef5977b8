"""cdi.engine.config from the real containerd 1.7.24 binary (scripts/engines.sh fetch; no daemon is started): the
configuration of "the containerd serving the endpoint" is found from a process named containerd with its --config
(here a stand-in process: starting the lab daemon is scripts/engines.sh's job) and read with the real
``containerd --config <file> config dump``, for config files of version 1, 2 and with enable_cdi off."""
import os
import subprocess
import sys
import time

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi import engine as E

pytestmark = pytest.mark.integration
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.path.join(ROOT, ".build", "engines", "containerd", "usr", "bin")


@pytest.fixture()
def daemon(tmp_path, monkeypatch):
    if not os.path.isfile(os.path.join(BIN, "containerd")):
        pytest.skip("the lab engines are not fetched (bash scripts/engines.sh fetch)")
    monkeypatch.setenv("PATH", "%s:%s" % (BIN, os.environ.get("PATH", "")))
    started = []

    def start(config_text):
        config = tmp_path / ("config-%d.toml" % len(started))
        sock = tmp_path / ("c-%d.sock" % len(started))
        config.write_text(config_text.replace("@SOCK@", str(sock)))
        # argv[0] "containerd" with the daemon's --config, as /proc shows a real one
        proc = subprocess.Popen(["/bin/bash", "-c", 'exec -a containerd %s -c "import time; time.sleep(60)" --config %s' % (
            sys.executable, config)])
        started.append(proc)
        for _attempt in range(100):
            with open("/proc/%d/cmdline" % proc.pid, "rb") as fh:
                if fh.read().startswith(b"containerd\0"):
                    break
            time.sleep(0.05)
        return {"name": "containerd", "version": "1.7.24", "endpoint": "unix://%s" % sock}, str(config)

    yield start
    for proc in started:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize("text, enabled, dirs", [
    ('version = 2\n[grpc]\n  address = "@SOCK@"\n[plugins."io.containerd.grpc.v1.cri"]\n  enable_cdi = true\n'
     '  cdi_spec_dirs = ["/opt/cdi"]\n', True, ["/opt/cdi"]),
    ('version = 2\n[grpc]\n  address = "@SOCK@"\n', False, ["/etc/cdi", "/var/run/cdi"]),
    ('[grpc]\n  address = "@SOCK@"\n[plugins.cri]\n  enable_cdi = true\n', True, ["/etc/cdi", "/var/run/cdi"]),
])
def test_real_config_dump(daemon, text, enabled, dirs):
    info, config = daemon(text)
    out = E.read_engine_config(info)
    assert (out["enabled"], out["spec_dirs"], out["config_version"]) == (enabled, dirs, 2)
    assert out["source"] == "%s/containerd --config %s config dump" % (BIN, config)
    files = [{"path": "/opt/cdi/x.yaml", "ok": True, "kind": "k.example.com/g", "devices": ["0"]}]
    [check] = E.engine_checks([dict(info, cdi_config=out)], files, {"k.example.com/g=0": "/opt/cdi/x.yaml"}, ["k.example.com/g=0"])
    assert check["status"] == ("PASS" if enabled and "/opt/cdi" in dirs else "FAIL")


def test_a_broken_config_is_not_run(daemon):
    info, _config = daemon('version = 2\n[grpc\n')
    out = E.read_engine_config(info)
    assert out["enabled"] is None and "failed to load TOML" in out["reason"]
