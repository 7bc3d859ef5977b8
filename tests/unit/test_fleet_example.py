"""inventory/fleet-example stays a fleet that works with this collection: every GPU node has one model group
(so its pins are unambiguous), pins only under names the report knows, only real options of the verify role,
a probe image pinned by digest, become set; its ansible.cfg has the fleet settings docs/fleet.md promises.
The inventory is read by ansible-inventory itself (group_vars included), as a run would read it."""
import configparser
import json
import os
import shutil
import subprocess

import pytest
import yaml

from ansible_collections.gpuprobe.layers.plugins.plugin_utils._report.model import PINS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FLEET = os.path.join(ROOT, "inventory", "fleet-example")


def _inventory(path):
    exe = shutil.which("ansible-inventory")
    if not exe:
        pytest.skip("ansible-inventory not on PATH")
    r = subprocess.run([exe, "-i", path, "--list"], capture_output=True, text=True, check=True, timeout=120)
    return json.loads(r.stdout)


def _hosts(inv, group):
    out = set(inv.get(group, {}).get("hosts", []))
    for child in inv.get(group, {}).get("children", []):
        out |= _hosts(inv, child)
    return out


@pytest.fixture(scope="module")
def fleet():
    return _inventory(os.path.join(FLEET, "hosts.yml"))


def test_every_gpu_node_has_exactly_one_model_group(fleet):
    models = fleet["gpu_nodes"]["children"]
    gpu = _hosts(fleet, "gpu_nodes")
    assert len(gpu) == 500 and len(models) >= 2
    for host in gpu:
        assert len([m for m in models if host in _hosts(fleet, m)]) == 1, host
    assert _hosts(fleet, "canary") <= gpu and _hosts(fleet, "new_nodes") <= gpu


def test_pins_options_become_and_image_of_every_gpu_node(fleet):
    with open(os.path.join(ROOT, "roles", "verify", "meta", "argument_specs.yml")) as f:
        options = yaml.safe_load(f)["argument_specs"]["main"]["options"]
    for host in _hosts(fleet, "gpu_nodes"):
        hv = fleet["_meta"]["hostvars"][host]
        pins = hv["gpuprobe_pins"]
        assert set(pins) <= set(PINS) and "driver_version" in pins, (host, pins)
        assert pins.get("runtime_version", "podman ").startswith(("podman ", "docker ")), pins  # versions.runtime's form
        unknown = [k for k in hv if k.startswith("verify_") and k not in options]
        assert unknown == [], (host, unknown)
        assert "@sha256:" in hv["verify_probe_image"]
        assert hv["ansible_become"] is True


def test_fleet_ansible_cfg(fleet):
    cfg = configparser.ConfigParser()
    assert cfg.read(os.path.join(FLEET, "ansible.cfg"))
    assert cfg.getboolean("ssh_connection", "pipelining")
    assert "ControlPersist=" in cfg.get("ssh_connection", "ssh_args")
    assert cfg.getint("defaults", "forks") >= 25
    callback = cfg.get("defaults", "callbacks_enabled")
    assert callback == "gpuprobe.layers.gpuprobe_summary"
    assert os.path.isfile(os.path.join(ROOT, "plugins", "callback", callback.split(".")[-1] + ".py"))
    stdout = cfg.get("defaults", "stdout_callback")
    assert stdout == "gpuprobe.layers.fleet"
    assert os.path.isfile(os.path.join(ROOT, "plugins", "callback", stdout.split(".")[-1] + ".py"))
    assert os.path.isfile(os.path.join(FLEET, cfg.get("defaults", "inventory")))


def test_localhost_inventory_still_alone():
    inv = _inventory(os.path.join(ROOT, "inventory", "localhost.yml"))
    assert list(inv["_meta"]["hostvars"]) == ["localhost"]
    assert inv["_meta"]["hostvars"]["localhost"]["ansible_connection"] == "local"
