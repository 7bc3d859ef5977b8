"""The pieces of the runtime discovery (issue 35): paths under a root with the node's links, socket identity, /proc,
systemd's unit precedence and environment files, the kubelet's endpoint precedence, containerd's imports and
CRI-O's drop-ins, and the docker CLI's context. Real files under tmp_path; the sockets are real unix sockets."""
import json
import os
import socket
import subprocess
import sys
import time

import pytest

from ansible_collections.gpuprobe.layers.plugins.module_utils._runtime import daemons, docker_context, kubelet, nodefs, systemd


def put(root, path, text, mode="w"):
    full = os.path.join(str(root), path.lstrip("/"))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    with open(full, mode) as fh:
        fh.write(text)
    return full


def link(root, path, target):
    full = os.path.join(str(root), path.lstrip("/"))
    os.makedirs(os.path.dirname(full), exist_ok=True)
    os.symlink(target, full)


def listen(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    s.listen(1)
    return s


# ---- paths under a root, socket identity -------------------------------------------------------------------

def test_an_absolute_link_is_followed_inside_the_root(tmp_path):
    link(tmp_path, "/var/run", "/run")      # as on the node: /var/run -> /run
    node, host = nodefs.resolve(str(tmp_path), "/var/run/containerd/containerd.sock")
    assert node == "/run/containerd/containerd.sock"
    assert host == os.path.join(str(tmp_path), "run/containerd/containerd.sock")   # not this machine's /run


def test_relative_links_and_dotdot(tmp_path):
    link(tmp_path, "/var/snap/microk8s/current", "7229")
    link(tmp_path, "/a/b", "../c")
    assert nodefs.resolve(str(tmp_path), "/var/snap/microk8s/current/args/kubelet")[0] == "/var/snap/microk8s/7229/args/kubelet"
    assert nodefs.resolve(str(tmp_path), "/a/b/x")[0] == "/c/x"


def test_a_link_loop_stops(tmp_path):
    link(tmp_path, "/loop", "/loop")
    assert nodefs.resolve(str(tmp_path), "/loop/x")[0] == "/loop/x"


def test_same_socket_by_inode_through_the_var_run_link(tmp_path):
    link(tmp_path, "/var/run", "/run")
    s = listen(os.path.join(str(tmp_path), "run/containerd/containerd.sock"))
    try:
        same, how = nodefs.same_socket("unix:///var/run/containerd/containerd.sock", "/run/containerd/containerd.sock", str(tmp_path))
        assert same and how.startswith("the same socket (st_dev, st_ino")
        other = listen(os.path.join(str(tmp_path), "run/k3s/containerd/containerd.sock"))
        try:
            same, how = nodefs.same_socket("unix:///var/run/containerd/containerd.sock", "/run/k3s/containerd/containerd.sock",
                                           str(tmp_path))
            assert not same and how.startswith("different sockets")
        finally:
            other.close()
    finally:
        s.close()


def test_same_socket_by_real_path_when_absent(tmp_path):
    link(tmp_path, "/var/run", "/run")
    assert nodefs.same_socket("unix:///var/run/crio/crio.sock", "/run/crio/crio.sock", str(tmp_path)) == (
        True, "the same real path /run/crio/crio.sock")
    assert nodefs.same_socket("tcp://10.0.0.1:1", "/run/crio/crio.sock", str(tmp_path))[0] is False


def test_same_socket_on_this_machine_by_inode(tmp_path):
    # root /: the real path and the inode of this machine's files; a link to a socket is the socket
    s = listen(str(tmp_path / "real" / "c.sock"))
    try:
        os.symlink(str(tmp_path / "real"), str(tmp_path / "alias"))
        assert nodefs.same_socket("unix://%s" % (tmp_path / "alias" / "c.sock"), str(tmp_path / "real" / "c.sock"))[0]
    finally:
        s.close()


# ---- /proc -------------------------------------------------------------------------------------------------

def test_proc_readers(tmp_path):
    put(tmp_path, "/proc/812/cmdline", b"/usr/local/bin/k3s server\0\0\0\0\0\0", "wb")
    put(tmp_path, "/proc/866/cmdline", b"containerd\0-c\0/x.toml\0-a\0/run/k3s/containerd/containerd.sock\0", "wb")
    put(tmp_path, "/proc/866/status", "Name:\tcontainerd\nPid:\t866\nPPid:\t812\n")
    put(tmp_path, "/proc/866/cgroup", "0::/system.slice/k3s.service\n")
    put(tmp_path, "/proc/866/environ", b"A=1\0B=x=y\0", "wb")
    put(tmp_path, "/proc/901/cgroup", "12:pids:/system.slice/kubelet.service\n1:name=systemd:/system.slice/kubelet.service\n")
    root = str(tmp_path)
    assert nodefs.proc_argv(root, 812) == ["/usr/local/bin/k3s", "server"]     # the title k3s leaves, split
    assert nodefs.proc_argv(root, 866)[:3] == ["containerd", "-c", "/x.toml"]
    assert nodefs.proc_ppid(root, 866) == 812 and nodefs.proc_unit(root, 866) == "k3s.service"
    assert nodefs.proc_unit(root, 901) == "kubelet.service"
    assert nodefs.proc_environ(root, 866) == {"A": "1", "B": "x=y"}
    assert [p["name"] for p in nodefs.processes(root)] == ["k3s", "containerd"]


def test_this_process_listens_where_proc_says(tmp_path):
    s = listen(str(tmp_path / "mine.sock"))
    try:
        listeners = nodefs.unix_listeners("/")
        assert str(tmp_path / "mine.sock") in nodefs.proc_sockets("/", os.getpid(), listeners)
    finally:
        s.close()


# ---- systemd -----------------------------------------------------------------------------------------------

def test_unit_precedence_and_dropin_order(tmp_path):
    put(tmp_path, "/lib/systemd/system/kubelet.service", "[Service]\nExecStart=/usr/bin/kubelet --from=lib\n")
    put(tmp_path, "/etc/systemd/system/kubelet.service", "[Service]\nExecStart=/usr/bin/kubelet --from=etc\n")
    put(tmp_path, "/usr/lib/systemd/system/kubelet.service.d/20-b.conf", "[Service]\nExecStart=\nExecStart=/usr/bin/kubelet --from=usr-20\n")
    put(tmp_path, "/etc/systemd/system/kubelet.service.d/10-a.conf", "[Service]\nEnvironment=X=etc-10\n")
    put(tmp_path, "/run/systemd/system/kubelet.service.d/30-c.conf", "[Service]\nEnvironment=X=run-30\n")
    put(tmp_path, "/usr/lib/systemd/system/kubelet.service.d/30-c.conf", "[Service]\nEnvironment=X=masked\n")
    main, dropins = systemd.unit_files(str(tmp_path), "kubelet.service")
    assert main == "/etc/systemd/system/kubelet.service"
    assert dropins == ["/etc/systemd/system/kubelet.service.d/10-a.conf", "/usr/lib/systemd/system/kubelet.service.d/20-b.conf",
                       "/run/systemd/system/kubelet.service.d/30-c.conf"]
    out = systemd.exec_start(str(tmp_path), "kubelet.service")
    assert out["argv"] == ["/usr/bin/kubelet", "--from=usr-20"] and out["env"]["X"] == "run-30"


def test_environment_files_override_environment_and_expand(tmp_path):
    put(tmp_path, "/etc/systemd/system/k3s.service",
        "[Service]\nEnvironment=\"A=from unit\" B=b\nEnvironmentFile=-/etc/default/%N\nEnvironmentFile=-/nonexistent\n"
        "ExecStart=/usr/local/bin/k3s \\\n    server $A ${B}x $EMPTY\n")
    put(tmp_path, "/etc/default/k3s", "# comment\nA='one two'\n")
    out = systemd.exec_start(str(tmp_path), "k3s.service")
    assert out["argv"] == ["/usr/local/bin/k3s", "server", "one", "two", "bx"]
    assert out["files"] == ["/etc/default/k3s"] and out["errors"] == []


def test_env_file_quotes_and_continuations():
    text = ('KUBELET_ARGS="--a=1 \\\n--b=2 \\\n  "\nX=\'lit $y\'\nexport Y=plain # not a comment\n; comment\nZ=a\\\nb\n'
            'BAD LINE\nQ="say \\"hi\\""\n')
    env = systemd.parse_env_file(text)
    assert env["KUBELET_ARGS"].split() == ["--a=1", "--b=2"]
    assert env["X"] == "lit $y" and env["Z"] == "ab" and env["Q"] == 'say "hi"'
    assert env["Y"] == "plain # not a comment"


# ---- the kubelet's precedence ------------------------------------------------------------------------------

def test_flag_over_dropins_over_config_over_default(tmp_path):
    root = str(tmp_path)
    put(tmp_path, "/c/config.yaml", "kind: KubeletConfiguration\ncontainerRuntimeEndpoint: unix:///from/config.sock\n")
    put(tmp_path, "/c/d/10.conf", "containerRuntimeEndpoint: unix:///from/10.sock\n")
    put(tmp_path, "/c/d/20.conf", "containerRuntimeEndpoint: /from/20.sock\n")
    put(tmp_path, "/c/d/30.yaml", "containerRuntimeEndpoint: unix:///not/a/conf.sock\n")   # not *.conf: not read
    put(tmp_path, "/c/d/40.conf", "maxPods: 10\n")
    args = ["--config=/c/config.yaml", "--config-dir", "/c/d"]
    out = kubelet.endpoint_of_args(root, args, "the running kubelet", "/proc/1/cmdline")
    assert out["endpoint"] == "unix:///from/20.sock" and out["source"] == "containerRuntimeEndpoint in /c/d/20.conf (the running kubelet's --config-dir)"
    out = kubelet.endpoint_of_args(root, args + ["--container-runtime-endpoint=unix:///flag.sock"], "the running kubelet", "/proc/1/cmdline")
    assert out["endpoint"] == "unix:///flag.sock" and "on the running kubelet's command line (/proc/1/cmdline)" in out["source"]
    out = kubelet.endpoint_of_args(root, ["--config=/c/config.yaml"], "the running kubelet", "/proc/1/cmdline")
    assert out["endpoint"] == "unix:///from/config.sock"
    out = kubelet.endpoint_of_args(root, [], "the running kubelet", "/proc/1/cmdline")
    assert out["endpoint"] == kubelet.DEFAULT_ENDPOINT and out["source"].startswith("the KubeletConfiguration default")


def test_a_json_config_and_unreadable_files(tmp_path):
    put(tmp_path, "/k.json", json.dumps({"kind": "KubeletConfiguration", "containerRuntimeEndpoint": "unix:///j.sock"}))
    put(tmp_path, "/bad.yaml", "kind: [unclosed\n")
    assert kubelet.endpoint_of_args(str(tmp_path), ["--config", "/k.json"], "k", "w")["endpoint"] == "unix:///j.sock"
    out = kubelet.endpoint_of_args(str(tmp_path), ["--config", "/bad.yaml"], "k", "w")
    # the kubelet fails on a file it cannot parse; it never falls back to the default: unknown, not the default
    assert out["endpoint"] is None and "not understood" in out["errors"][0] and out["unknown"].startswith("unknown: kubelet config /bad.yaml")
    out = kubelet.endpoint_of_args(str(tmp_path), ["--config", "/missing.yaml"], "k", "w")
    assert out["endpoint"] is None and out["errors"] == ["kubelet config /missing.yaml not readable by uid %d: No such file or directory" % os.geteuid()]
    # a drop-in not read may set it after the one read: unknown too; the flag still wins over both
    put(tmp_path, "/d/10.conf", "containerRuntimeEndpoint: unix:///ten.sock\n")
    put(tmp_path, "/d/20.conf", "containerRuntimeEndpoint: [unclosed\n")
    assert kubelet.endpoint_of_args(str(tmp_path), ["--config-dir", "/d"], "k", "w")["endpoint"] is None
    assert kubelet.endpoint_of_args(str(tmp_path), ["--config-dir", "/d", "--container-runtime-endpoint=/f.sock"], "k", "w")["endpoint"] == "unix:///f.sock"


def test_kubelite_args_file(tmp_path):
    put(tmp_path, "/args/kubelet", '# c\n--container-runtime-endpoint=${SNAP_COMMON}/run/containerd.sock\n\n--node-labels="a=b,c=d"\n'
                                   "--root-dir=$SNAP_DATA/x\n")
    args = kubelet.kubelite_args(str(tmp_path), "/args/kubelet", {"SNAP_DATA": "/var/snap/microk8s/7229"})
    assert args == ["--container-runtime-endpoint=/var/snap/microk8s/common/run/containerd.sock", "--node-labels=a=b,c=d",
                    "--root-dir=/var/snap/microk8s/7229/x"]


# ---- containerd and CRI-O ----------------------------------------------------------------------------------

def test_containerd_imports_merge_as_containerd_does(tmp_path):
    root = str(tmp_path)
    put(tmp_path, "/etc/containerd/config.toml", 'version = 3\nimports = ["conf.d/*.toml", "/etc/containerd/extra.toml"]\n'
                                                 '[grpc]\naddress = "/run/containerd/containerd.sock"\nuid = 0\n'
                                                 "[plugins.'io.containerd.cri.v1.runtime']\nenable_cdi = true\n")
    put(tmp_path, "/etc/containerd/conf.d/20-b.toml", 'version = 3\n[grpc]\naddress = "/run/b.sock"\n')
    put(tmp_path, "/etc/containerd/conf.d/10-a.toml", "version = 3\n[plugins.'io.containerd.cri.v1.runtime']\ncdi_spec_dirs = [\"/x\"]\n")
    put(tmp_path, "/etc/containerd/extra.toml", 'version = 3\n[grpc]\naddress = ""\n')
    out = daemons.containerd_config(root, "/etc/containerd/config.toml")
    assert out["files"] == ["/etc/containerd/config.toml", "/etc/containerd/conf.d/10-a.toml", "/etc/containerd/conf.d/20-b.toml",
                            "/etc/containerd/extra.toml"]
    assert daemons.containerd_address(out["doc"]) == "/run/b.sock"          # a non-empty import overrides; "" does not
    assert out["doc"]["plugins"]["io.containerd.cri.v1.runtime"] == {"cdi_spec_dirs": ["/x"]}   # a section replaced whole


def test_containerd_version_4_server_plugin_address():
    doc = {"version": 4, "plugins": {"io.containerd.server.v1.grpc": {"address": "/run/c4.sock"}}}
    assert daemons.containerd_address(doc) == "/run/c4.sock"


def test_crio_dropins_walked_in_order(tmp_path):
    put(tmp_path, "/etc/crio/crio.conf", '[crio.api]\nlisten = "/var/run/crio/crio.sock"\n')
    put(tmp_path, "/etc/crio/crio.conf.d/10-x", '[crio.api]\nlisten = "/run/x.sock"\n')
    put(tmp_path, "/etc/crio/crio.conf.d/20-sub/05-y.conf", '[crio.api]\nlisten = "/run/y.sock"\n')
    out = daemons.crio_config(str(tmp_path), "/etc/crio/crio.conf", "/etc/crio/crio.conf.d")
    assert out["listen"] == ("/run/y.sock", "/etc/crio/crio.conf.d/20-sub/05-y.conf")


def test_a_daemon_that_listens_elsewhere_than_its_files_say(tmp_path):
    """On a live node the kernel's answer (the sockets the process holds, /proc/<pid>/fd and /proc/net/unix) wins over
    its configuration: a process named containerd whose --config names one address and that listens on another."""
    sock, config = tmp_path / "really.sock", tmp_path / "config.toml"
    config.write_text('version = 2\n[grpc]\n  address = "%s"\n' % (tmp_path / "configured.sock"))
    code = "import socket, time; s = socket.socket(socket.AF_UNIX); s.bind(%r); s.listen(1); time.sleep(60)" % str(sock)
    proc = subprocess.Popen(["/bin/bash", "-c", 'exec -a containerd "$0" -c "$1" --config "$2"', sys.executable, code, str(config)])
    try:
        for _attempt in range(200):
            if sock.exists():
                break
            time.sleep(0.05)
        [d] = [d for d in daemons.running("/") if d["pid"] == proc.pid]
        assert d["engine"] == "containerd" and d["config_files"] == [str(config)]
        assert d["listening"] == [str(sock)] and d["socket"] == str(sock)
        assert d["socket_from"] == "the socket it listens on (/proc/%d/fd, /proc/net/unix)" % proc.pid
        assert d["errors"] == ["its configuration says %s but it listens on %s" % (tmp_path / "configured.sock", sock)]
    finally:
        proc.kill()
        proc.wait()


# ---- the docker CLI's context ------------------------------------------------------------------------------

def _contexts(tmp_path, current, hosts):
    d = tmp_path / "home" / ".docker"
    for name, host in hosts.items():
        meta = docker_context.context_meta_path(str(d), name)
        put("/", meta, json.dumps({"Name": name, "Metadata": {}, "Endpoints": {"docker": {"Host": host, "SkipTLSVerify": False}}}))
    if current is not None:
        put("/", str(d / "config.json"), json.dumps({"auths": {}, "currentContext": current}))
    return {"HOME": str(tmp_path / "home")}


def test_docker_host_wins(tmp_path):
    env = dict(_contexts(tmp_path, "rootless", {"rootless": "unix:///run/user/1000/docker.sock"}), DOCKER_HOST="unix:///x.sock",
               DOCKER_CONTEXT="rootless")
    out = docker_context.resolve(env)
    assert (out["endpoint"], out["context"], out["source"], out["refused"]) == ("unix:///x.sock", "default", "DOCKER_HOST=unix:///x.sock", None)


def test_docker_context_env_over_current_context(tmp_path):
    env = dict(_contexts(tmp_path, "rootless", {"rootless": "unix:///run/user/1000/docker.sock", "other": "unix:///o.sock"}),
               DOCKER_CONTEXT="other")
    out = docker_context.resolve(env)
    assert out["endpoint"] == "unix:///o.sock" and out["context"] == "other"
    assert out["source"].startswith("context other: DOCKER_CONTEXT=other, Endpoints.docker.Host in ")


def test_current_context_and_default(tmp_path):
    env = _contexts(tmp_path, "rootless", {"rootless": "unix:///run/user/1000/docker.sock"})
    out = docker_context.resolve(env)
    assert out["endpoint"] == "unix:///run/user/1000/docker.sock" and out["local"] and out["refused"] is None
    assert "currentContext rootless in %s/config.json" % (tmp_path / "home" / ".docker") in out["source"]
    out = docker_context.resolve({"HOME": str(tmp_path / "nobody")})
    assert out["endpoint"] == "unix:///var/run/docker.sock" and out["context"] == "default"


@pytest.mark.parametrize("host", ["ssh://gpu@10.0.0.5", "tcp://10.0.0.5:2376", "npipe:////./pipe/docker_engine"])
def test_a_context_that_is_not_a_local_socket_is_refused(tmp_path, host):
    out = docker_context.resolve(_contexts(tmp_path, "remote", {"remote": host}))
    assert out["endpoint"] == host and not out["local"]
    assert "not a local unix socket" in out["refused"] and "the node's verdict must be about this node" in out["refused"]


def test_a_missing_context_is_refused(tmp_path):
    out = docker_context.resolve(_contexts(tmp_path, "gone", {}))
    assert out["endpoint"] is None and "cannot be read" in out["refused"]
