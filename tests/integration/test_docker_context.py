"""The docker endpoint a verdict names is the one the docker CLI really uses (issue 35 item 5), with the REAL docker CLI
26.1.5 and dockerd 26.1.5 of the engines lab (scripts/engines.sh start dockerd, on its private socket).

The contexts are made by the real CLI (``docker context create`` / ``use``) in a private DOCKER_CONFIG. With no
DOCKER_HOST:

- a context naming the lab daemon's socket: the selection names that endpoint (``unix://.../docker.sock``, not
  /var/run/docker.sock), pins it as DOCKER_HOST, and the daemon it asked is the one the bare CLI talks to (the same
  daemon ID); ``docker context show`` names the context the resolution took;
- an ``ssh://`` context: the selection refuses it with the reason and never asks it, and neither does probe_cleanup: the
  ``ssh`` the docker CLI would start (a stand-in on PATH that records its calls) is never run by them, while the bare
  CLI does run it.
"""
import json
import os
import subprocess
import sys

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import cleanup as _cleanup
from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import select as sel

pytestmark = pytest.mark.integration

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENGINES = os.path.realpath(os.environ.get("GPUPROBE_ENGINES_DIR", os.path.join(ROOT, ".build", "engines")))
SCRIPT = os.path.join(ROOT, "scripts", "engines.sh")
DOCKER_BIN = os.path.join(ENGINES, "docker-cli", "usr", "bin")
LAB_HOST = "unix://" + os.path.join(ENGINES, "run", "dockerd", "docker.sock")


def _sh(*args, timeout=300):
    return subprocess.run(["bash", SCRIPT] + list(args), capture_output=True, text=True, timeout=timeout, check=False,
                          env=dict(os.environ, PYTHON=sys.executable, GPUPROBE_ENGINES_NO_PROBE_IMAGE="1"))


@pytest.fixture(scope="module")
def dockerd(request):
    if os.geteuid() != 0:
        pytest.skip("needs root (dockerd)")
    if not os.path.isfile(os.path.join(ENGINES, "docker.io", ".deb")):
        pytest.skip("engines not fetched (docker.io): run scripts/engines.sh fetch")
    r = _sh("start", "dockerd")
    assert r.returncode == 0, r.stderr
    if "already running" not in r.stderr + r.stdout:
        request.config.add_cleanup(lambda: _sh("stop", "dockerd", timeout=120))
    return LAB_HOST


@pytest.fixture()
def cli(tmp_path, monkeypatch):
    """PATH: the lab's docker CLI and a stand-in ssh that records its calls; a private DOCKER_CONFIG; no DOCKER_HOST."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    calls = tmp_path / "ssh.calls"
    (bindir / "ssh").write_text('#!/bin/sh\necho "$*" >> "%s"\nexit 255\n' % calls)
    (bindir / "ssh").chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s:/usr/bin:/bin" % (bindir, DOCKER_BIN))
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path / "docker-config"))
    for var in ("DOCKER_HOST", "DOCKER_CONTEXT"):
        monkeypatch.delenv(var, raising=False)

    def docker(*args, env=None):
        return subprocess.run([os.path.join(DOCKER_BIN, "docker")] + list(args), capture_output=True, text=True, timeout=60,
                              check=False, env=dict(os.environ, **(env or {})))

    return docker, calls


def test_the_current_context_is_the_endpoint_named_and_asked(dockerd, cli):  # pylint: disable=redefined-outer-name
    docker, _calls = cli
    assert docker("context", "create", "lab", "--docker", "host=%s" % dockerd).returncode == 0
    assert docker("context", "use", "lab").returncode == 0
    assert docker("context", "show").stdout.strip() == "lab"
    [info] = sel.select_runtimes("docker")
    assert (info["name"], info["endpoint"], info["env"], info["docker_context"]) == ("docker", dockerd, {"DOCKER_HOST": dockerd}, "lab")
    assert info["daemon_running"] and info["version"] == "26.1.5+dfsg1" and info["usable"], info
    assert info["endpoint_source"].startswith("context lab: currentContext lab in %s/config.json" % os.environ["DOCKER_CONFIG"])
    # the daemon the selection asked (DOCKER_HOST pinned) is the one the bare CLI talks to through its context
    bare = json.loads(docker("info", "--format", "{{json .}}").stdout)
    pinned = json.loads(docker("info", "--format", "{{json .}}", env={"DOCKER_HOST": info["endpoint"]}).stdout)
    assert bare["ID"] == pinned["ID"] and bare["CDISpecDirs"] == info["daemon_info"]["CDISpecDirs"]
    # DOCKER_CONTEXT names another context: it wins over currentContext, as for the CLI
    assert docker("context", "create", "other", "--docker", "host=unix:///nonexistent/docker.sock").returncode == 0
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DOCKER_CONTEXT", "other")
        [other] = sel.select_runtimes("docker")
        assert docker("context", "show").stdout.strip() == "other"
    assert other["endpoint"] == "unix:///nonexistent/docker.sock" and other["daemon_running"] is False
    # the real CLI exits 0 there: its answer's ServerErrors say no daemon answered
    assert other["reason"] == "docker info failed: Cannot connect to the Docker daemon at unix:///nonexistent/docker.sock. " \
                              "Is the docker daemon running?"


def test_an_ssh_context_is_refused_and_never_asked(cli):
    docker, calls = cli
    assert docker("context", "create", "remote", "--docker", "host=ssh://gpu@192.0.2.10").returncode == 0
    assert docker("context", "use", "remote").returncode == 0
    [info] = sel.select_runtimes("docker")
    assert info["usable"] is False and info["endpoint"] == "ssh://gpu@192.0.2.10" and info["docker_context"] == "remote"
    assert info["reason"].startswith("the docker CLI would talk to ssh://gpu@192.0.2.10 (context remote: currentContext remote")
    assert "the node's verdict must be about this node" in info["reason"]
    out = _cleanup.cleanup(runtime="docker", specs=False)
    assert out["containers"] == [] and out["errors"] == [info["reason"]]
    assert not calls.exists(), calls.read_text()
    # the bare CLI would have gone to that machine: it starts ssh
    docker("info")
    assert "192.0.2.10" in calls.read_text()


def test_a_dead_context_on_a_docker_host_is_still_docker(dockerd, cli):  # pylint: disable=redefined-outer-name
    """Issue 44 item 2: the CLI's current context names a socket nobody serves while a dockerd runs here: ``auto``
    asks that daemon where it listens (the docker.sock it holds open, /proc/net/unix) and names the dead context;
    before, "no running docker daemon" made podman the runtime of a docker host."""
    from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import nodefs  # pylint: disable=import-outside-toplevel
    docker, _calls = cli
    assert docker("context", "create", "dead", "--docker", "host=unix:///nonexistent/docker.sock").returncode == 0
    assert docker("context", "use", "dead").returncode == 0
    with open(os.path.join(ENGINES, "run", "dockerd", "dockerd.pid")) as fh:
        pid = int(fh.read().strip())
    procs = [p for p in nodefs.processes("/") if p["pid"] == pid]   # the lab's dockerd, alone (no kubelet, no other engine)
    assert procs and procs[0]["name"] == "dockerd"
    [info] = sel.select_runtimes("auto", procs=procs)
    assert (info["name"], info["usable"], info["daemon_running"], info["endpoint"], info["env"]) == (
        "docker", True, True, dockerd, {"DOCKER_HOST": dockerd}), info
    assert info["selected_because"].startswith("docker 26.1.5+dfsg1 at %s, the socket the running dockerd (pid %d) listens on; "
                                               "no kubelet installed" % (dockerd, pid)), info["selected_because"]
    assert ("the docker CLI's endpoint unix:///nonexistent/docker.sock (context dead: currentContext dead in %s/config.json"
            % os.environ["DOCKER_CONFIG"]) in info["selected_because"]
    assert "did not answer (docker info failed: Cannot connect to the Docker daemon at unix:///nonexistent/docker.sock." \
           in info["selected_because"]
    assert info["cli_endpoint"]["endpoint"] == "unix:///nonexistent/docker.sock"


def test_the_cdi_layer_never_contacts_a_refused_or_silent_docker(cli, tmp_path):
    """Issue 44 item 5: the cdi layer reads docker's CDI configuration at the endpoint the selection used. An ssh://
    context the selection refused is never contacted by it (the stand-in ssh records no call), and a daemon that never
    answered (a dead socket: the real CLI 26 exits 0 with ServerErrors) is not recorded live with "CDISpecDirs is
    empty": enabled unknown, live False, the reason said."""
    from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.engine import describe, read_engine_config  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.layer import record as cdi_layer  # pylint: disable=import-outside-toplevel
    docker, calls = cli
    assert docker("context", "create", "remote", "--docker", "host=ssh://gpu@192.0.2.10").returncode == 0
    assert docker("context", "use", "remote").returncode == 0
    [info] = sel.select_runtimes("docker")
    engine = describe(info)
    engine["cdi_config"] = read_engine_config(engine)
    cfg = engine["cdi_config"]
    assert (cfg["enabled"], cfg["live"]) == (None, False) and cfg["reason"].startswith("not asked: the docker CLI would talk to ssh://"), cfg
    cdi_layer(spec_dirs=[str(tmp_path)], discover_runtime_dirs_=False, devices=[], kinds=[], engines=[engine])
    assert not calls.exists(), calls.read_text()
    # a daemon that never answered: the CLI's own answer has ServerErrors and no ServerVersion
    silent = {"name": "docker", "path": os.path.join(DOCKER_BIN, "docker"), "env": {"DOCKER_HOST": "unix:///nonexistent/docker.sock"}}
    cfg = read_engine_config(silent)
    assert (cfg["enabled"], cfg["live"]) == (None, False), cfg
    assert cfg["reason"] == "no docker daemon answered: Cannot connect to the Docker daemon at unix:///nonexistent/docker.sock. " \
                            "Is the docker daemon running?", cfg


def test_dockers_builtin_runtimes_give_no_file_warning(dockerd):  # pylint: disable=redefined-outer-name
    """Issue 44 item 7: the lab's dockerd (daemon.json: runtimes gpuprobe-runc, the default) lists runc and
    io.containerd.runc.v2 as well in docker info; its file and the running daemon agree (cdi.engine.file PASS), where a
    false WARN was given on every docker host."""
    from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.engine import describe, read_engine_config  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuprobe.layers.plugins.module_utils._cdi.engine_live import file_checks  # pylint: disable=import-outside-toplevel
    [info] = sel.select_runtimes("docker", endpoint=dockerd)
    engine = describe(info)
    engine["cdi_config"] = cfg = read_engine_config(engine)
    assert {"runc", "io.containerd.runc.v2", "gpuprobe-runc"} <= set(cfg["handlers"]), cfg["handlers"]
    assert cfg["file"]["source"] == os.path.join(ENGINES, "run", "dockerd", "daemon.json") and cfg["disagreements"] == [], cfg
    [check] = file_checks(engine)
    assert check["status"] == "PASS", check
