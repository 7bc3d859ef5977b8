"""A private containerd 1.7.24 (the engines lab's binary, scripts/engines.sh fetch) with runtime handlers of the test's
own, for the handler and live-configuration tests (tests/integration/test_handlers_containerd.py) and for recording the
fixtures of tests/unit/fixtures/engines/live/ (capture.py there).

Each daemon lives under its own directory (socket, root, state, NRI socket, logs): nothing is shared with the lab
daemon of scripts/engines.sh (.build/engines/run/containerd), with another test or with the system's containerd. The
configuration is what scripts/engines.sh writes (native snapshotter, cgroupfs, the lab's pause image), plus:

- ``handlers``: {name: BinaryName} of extra CRI runtime handlers (runtime_type io.containerd.runc.v2); a handler
  whose binary is ``recorder(...)`` is a shell wrapper around runc that appends each call's argv to a log file, one
  made by ``refuser(...)`` refuses every call (exit 1, a line on stderr), as a broken OCI runtime does;
- ``default``: default_runtime_name; ``enable_cdi``: the CRI plugin's switch, changed in the file only by
  ``set_file_cdi`` (the daemon keeps what it started with: containerd reads its file once);
- ``nri``: the NRI plugin enabled, on a socket in the daemon's directory.

Each handler's runc keeps its state under the daemon's directory (``Root``), not runc's default /run/containerd/runc.
"""
import os
import shutil
import signal
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ENGINES = os.path.realpath(os.environ.get("GPUPROBE_ENGINES_DIR", os.path.join(ROOT, ".build", "engines")))
BIN = os.path.join(ENGINES, "containerd", "usr", "bin")
PAUSE_TAR = os.path.join(ENGINES, "run", "pause-image", "pause.tar")
PROBE_TAR = os.path.join(ENGINES, "run", "probe-image.tar")
DESCRIPTOR = os.path.join(ENGINES, "cri", "api.desc")
SANDBOX_IMAGE = "localhost/gpuprobe-pause:local"
OUTSIDE = ("/run/containerd", "/run/containerd/s")
DISABLED = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper",
            "io.containerd.snapshotter.v1.aufs", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]


def runc():
    """The runc the lab uses here (Debian 13's where it runs, else the system's), as scripts/engines.sh picks it."""
    own = os.path.join(ENGINES, "runc", "usr", "sbin", "runc")
    if os.access(own, os.X_OK) and subprocess.run([own, "--version"], capture_output=True, check=False).returncode == 0:
        return own
    return shutil.which("runc")


def missing():
    """Why the lab cannot run here, or None."""
    if os.geteuid() != 0:
        return "needs root (containerd runs containers)"
    for path, what in ((os.path.join(BIN, "containerd"), "containerd (scripts/engines.sh fetch)"),
                       (DESCRIPTOR, "the CRI descriptor (scripts/engines.sh stubs)"),
                       (PAUSE_TAR, "the pause image (scripts/engines.sh start containerd builds it)")):
        if not os.path.exists(path):
            return "no %s at %s" % (what, path)
    if not runc():
        return "no runc"
    return None


def recorder(base, name):
    """A wrapper around runc that logs each call (pid and argv) to ``<base>/<name>.log``; its path."""
    path = os.path.join(base, name)
    with open(path, "w") as f:
        f.write('#!/bin/sh\necho "$$ $*" >> %s.log\nexec %s "$@"\n' % (path, runc()))
    os.chmod(path, 0o755)
    return path


def refuser(base, name):
    """An OCI runtime binary that refuses every call (as a broken or mis-installed runtime does); its path."""
    path = os.path.join(base, name)
    with open(path, "w") as f:
        f.write('#!/bin/sh\necho "$$ $*" >> %s.log\necho "%s: refused by the test (an OCI runtime that fails)" >&2\nexit 1\n'
                % (path, name))
    os.chmod(path, 0o755)
    return path


def calls(binary):
    """The argv lines the wrapper ``binary`` logged (recorder/refuser)."""
    try:
        with open(binary + ".log") as f:
            return [line.rstrip("\n") for line in f]
    except OSError:
        return []


class Containerd(object):
    def __init__(self, base, enable_cdi=True, handlers=None, default="runc", nri=False, annotations=None):
        self.base = os.path.realpath(str(base))
        self.enable_cdi = enable_cdi
        self.handlers = dict(handlers or {})
        self.default = default
        self.nri = nri
        self.annotations = dict(annotations or {})   # handler -> container_annotations
        self.config = os.path.join(self.base, "config.toml")
        self.socket = os.path.join(self.base, "containerd.sock")
        self.endpoint = "unix://" + self.socket
        self.nri_socket = os.path.join(self.base, "nri.sock")
        self.proc = None

    def config_text(self, enable_cdi):
        b = self.base
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        lines = [
            "version = 2", 'root = "%s/root"' % b, 'state = "%s/state"' % b,
            "disabled_plugins = [%s]" % ", ".join('"%s"' % p for p in DISABLED),
            "[grpc]", '  address = "%s"' % self.socket, "[ttrpc]", '  address = "%s.ttrpc"' % self.socket,
            "[metrics]", '  address = ""',
            '[plugins."io.containerd.internal.v1.opt"]', '  path = "%s/opt"' % b,
            '[plugins."io.containerd.nri.v1.nri"]', "  disable = %s" % ("false" if self.nri else "true"),
            '  socket_path = "%s"' % self.nri_socket, '  plugin_path = "%s/nri-plugins"' % b,
            '  plugin_config_path = "%s/nri-conf"' % b,
            "[%s]" % cri, '  sandbox_image = "%s"' % SANDBOX_IMAGE, "  enable_cdi = %s" % ("true" if enable_cdi else "false"),
            '  cdi_spec_dirs = ["/etc/cdi", "/var/run/cdi"]', "  restrict_oom_score_adj = true", "  disable_apparmor = true",
            '  stream_server_address = "127.0.0.1"', '  stream_server_port = "0"',
            "[%s.cni]" % cri, '  bin_dir = "%s/cni/bin"' % b, '  conf_dir = "%s/cni/conf"' % b,
            "[%s.containerd]" % cri, '  snapshotter = "native"', '  default_runtime_name = "%s"' % self.default,
        ]
        handlers = dict([("runc", runc())] + list(self.handlers.items()))
        for name, binary in handlers.items():
            lines += ["[%s.containerd.runtimes.%s]" % (cri, name), '  runtime_type = "io.containerd.runc.v2"']
            if self.annotations.get(name):
                lines.append("  container_annotations = [%s]" % ", ".join('"%s"' % a for a in self.annotations[name]))
            lines += ["[%s.containerd.runtimes.%s.options]" % (cri, name), '  BinaryName = "%s"' % binary,
                      '  Root = "%s/runc"' % b, "  SystemdCgroup = false"]
        return "\n".join(lines) + "\n"

    def ctr(self, *args, check=True, timeout=120):
        r = subprocess.run([os.path.join(BIN, "ctr"), "--address", self.socket] + list(args), capture_output=True, text=True,
                           timeout=timeout, check=False)
        if check and r.returncode != 0:
            raise RuntimeError("ctr %s: %s" % (" ".join(args), r.stderr.strip()))
        return r

    def start(self, images=(PAUSE_TAR,)):
        # containerd 1.7's shim sockets go to /run/containerd/s whatever its state dir: what this start creates there
        # is removed at stop when empty (scripts/engines.sh does the same)
        self.outside = [d for d in OUTSIDE if not os.path.exists(d)]
        for d in ("root", "state", "opt", "cni/bin", "cni/conf", "nri-plugins", "nri-conf"):
            os.makedirs(os.path.join(self.base, d), exist_ok=True)
        with open(self.config, "w") as f:
            f.write(self.config_text(self.enable_cdi))
        env = dict(os.environ, PATH="%s:%s" % (BIN, os.environ.get("PATH", "")))
        with open(os.path.join(self.base, "containerd.log"), "w") as log:
            self.proc = subprocess.Popen([os.path.join(BIN, "containerd"), "--config", self.config], stdout=log, stderr=log,
                                         stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        for _attempt in range(300):
            if self.proc.poll() is not None:
                raise RuntimeError("containerd exited: %s" % self.log()[-2000:])
            if os.path.exists(self.socket) and self.ctr("version", check=False, timeout=10).returncode == 0:
                break
            time.sleep(0.1)
        else:
            raise RuntimeError("containerd did not answer: %s" % self.log()[-2000:])
        for tar in images:
            if tar and os.path.exists(tar):
                self.ctr("-n", "k8s.io", "images", "import", "--snapshotter", "native", tar, timeout=300)
        return self

    def set_file_cdi(self, on):
        """Edit the configuration FILE only (no restart, no signal): the running daemon keeps its own."""
        with open(self.config, "w") as f:
            f.write(self.config_text(on))

    def log(self):
        try:
            with open(os.path.join(self.base, "containerd.log")) as f:
                return f.read()
        except OSError:
            return ""

    def stop(self):
        """Kill this daemon's tasks, the daemon, the shims that name its socket; unmount what is left below its dir."""
        if self.proc is not None and self.proc.poll() is None:
            for ns in self.ctr("namespaces", "ls", "-q", check=False, timeout=20).stdout.split():
                for tid in self.ctr("-n", ns, "tasks", "ls", "-q", check=False, timeout=20).stdout.split():
                    self.ctr("-n", ns, "tasks", "kill", "-s", "SIGKILL", tid, check=False, timeout=20)
                    time.sleep(0.2)
                    self.ctr("-n", ns, "tasks", "delete", "-f", tid, check=False, timeout=20)
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open("/proc/%s/cmdline" % pid, "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if b"-address" in argv and self.socket.encode() in argv and b"containerd-shim" in os.path.basename(argv[0]):
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except OSError:
                    pass
        with open("/proc/self/mountinfo") as f:
            mounts = sorted((line.split()[4] for line in f if line.split()[4].startswith(self.base + "/")), reverse=True)
        for m in mounts:
            subprocess.run(["umount", "-l", m], capture_output=True, check=False)
        for d in sorted(getattr(self, "outside", []), reverse=True):
            try:
                os.rmdir(d)
            except OSError:
                pass
