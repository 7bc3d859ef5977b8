"""The OCI hooks an engine adds of its own, counted from its configuration (issue 42): podman's hooks_dir
(containers.conf; oci-hooks(5) files), else not known. The verdict names a hook by number only beside these."""
import json

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime.own_hooks import engine_hooks

PODMAN = {"name": "podman", "version": "4.3.1", "oci_runtime": "runc 1.1.5+ds1"}


def _hook(directory, name, stages, path="/usr/libexec/hook", version="1.0.0"):
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text(json.dumps({"version": version, "hook": {"path": path}, "when": {"always": True},
                                              "stages": stages}))


def _conf(tmp_path, dirs):
    """A containers.conf naming ``dirs`` (node paths: under tmp_path/root) as hooks_dir (None: not set)."""
    conf = tmp_path / "containers.conf"
    conf.write_text("[engine]\nruntime = \"runc\"\n" + ("hooks_dir = %s\n" % json.dumps(dirs) if dirs is not None else ""))
    return {"CONTAINERS_CONF": str(conf)}


def test_podman_counts_the_hooks_of_its_hooks_dirs_a_later_dir_replacing_a_file_of_the_same_name(tmp_path):
    first, second = tmp_path / "root/etc/hooks-a", tmp_path / "root/etc/hooks-b"
    _hook(first, "site.json", ["prestart"], "/usr/libexec/first")
    _hook(second, "site.json", ["createContainer"], "/usr/libexec/second")
    _hook(second, "Other.json", ["poststop", "prestart"], "/usr/libexec/other")
    (second / "notes.txt").write_text("not a hook")
    got = engine_hooks(PODMAN, root=str(tmp_path / "root"), environ=_conf(tmp_path, ["/etc/hooks-a", "/etc/hooks-b"]))
    assert got["known"] is True and got["why"] is None
    assert got["stages"] == {"createContainer": ["/usr/libexec/second"], "poststop": ["/usr/libexec/other"],
                             "prestart": ["/usr/libexec/other"]}
    assert "/etc/hooks-b" in got["source"]


def test_podman_without_hooks_dir_reads_its_default_dir_under_the_node_root(tmp_path):
    root = tmp_path / "root"
    environ = _conf(tmp_path, None)
    assert engine_hooks(PODMAN, root=str(root), environ=environ)["stages"] == {}  # the dir does not exist: no hook
    _hook(root / "usr/share/containers/oci/hooks.d", "nvidia.json", ["prestart"], "/usr/bin/nvidia-container-toolkit")
    got = engine_hooks(PODMAN, root=str(root), environ=environ)
    assert got["known"] and got["stages"] == {"prestart": ["/usr/bin/nvidia-container-toolkit"]}


@pytest.mark.parametrize("stages, version, why", [
    (["precreate"], "1.0.0", "precreate hook may rewrite"),
    (["prestart"], "0.1.0", "not an OCI hook of version 1.0.0"),
])
def test_a_hook_file_that_cannot_be_counted_makes_the_engine_s_hooks_unknown(tmp_path, stages, version, why):
    _hook(tmp_path / "root/d", "x.json", stages, version=version)
    got = engine_hooks(PODMAN, root=str(tmp_path / "root"), environ=_conf(tmp_path, ["/d"]))
    assert got["known"] is False and why in got["why"]


@pytest.mark.parametrize("info, why", [
    (dict(PODMAN, oci_runtime="nvidia 1.17.0"), "the OCI runtime 'nvidia' may add hooks of its own"),
    ({"name": "docker", "oci_runtime": "runc"}, "docker's own hooks"),
    ({"name": "containerd", "oci_runtime": "runc"}, "containerd's own hooks"),
])
def test_other_engines_and_runtimes_own_hooks_are_not_known(tmp_path, info, why):
    got = engine_hooks(info, root=str(tmp_path), environ=_conf(tmp_path, []))
    assert got["known"] is False and why in got["why"]
