"""Fleet cost of `verify-gpu.yml -e gpuprobe_mode=audit` against an `ansible -m ping` sweep of the same hosts,
over real SSH, side by side in one run (no GPU needed; root on Linux, openssh-server installed).

    python benchmarks/bench_fleet.py OUT.json [--sizes 10,50,200] [--rounds 3] [--large-rounds 3] [--forks 20]
                                              [--time-limit 1500] [--no-local] [--playbook PATH] [--gpus 8]
                                              [--ssh-compression] [--parts]

Set-up (all under one temporary directory, removed at the end):
  * N real sshd, one per loopback address 127.0.0.2 ... 127.0.0.(N+1) (then 127.0.1.2 ...), all on one port
    (--port, 2222), each bound to its own address with its own config and generated host key: key auth only
    (one generated client key), root login by key, no PAM, LogLevel ERROR, MaxStartups/MaxSessions high
    enough for ControlPersist multiplexing. Every sshd is a child of this script, killed at exit.
  * N synthetic GPU nodes (tests/unit/fixtures/host/hostfixture.py build_node: real char devices made with
    mknod, --gpus GPUs each, procfs information files) plus an nvidia.com/gpu CDI spec for that tree in
    <tree>/etc/cdi; the inventory gives each host verify_root (its tree), verify_nvml/verify_k8s false,
    ansible_host (its address), key, port, user root, and the venv's python as interpreter.
  * An ansible.cfg of the fleet settings (inventory/fleet-example/ansible.cfg): --forks, pipelining,
    gathering explicit, host key checking off, ControlMaster/ControlPersist, no ssh compression (-C with
    --ssh-compression: Ansible's default ssh_args, which the issue 36 figures of 1.5x were measured with).
For each N in --sizes, rounds of (a) `ansible -i INV all -m ansible.builtin.ping` and
(b) `ansible-playbook -i INV PLAYBOOK -e gpuprobe_mode=audit -e gpuprobe_report_dir=DIR`, interleaved and in
alternating order (a b, b a, ...) so that drift hits both alike: a round is one pair, at least 3 pairs per N
(--rounds, --large-rounds; fewer is refused: one pair has no spread). Each command gets its own fresh ControlPath
directory, so neither reuses the other's SSH masters; its masters are closed after it. A run counts only
when it succeeded: ping exits 0 with N SUCCESS lines; audit exits 0 and its gpuprobe-report-latest.json
lists N hosts, none unreachable or unverifiable. A failed run is reported as failed, never timed.
With --parts, (c) the verify play of verify-gpu.yml alone (its one task per node, no preflight, no report) runs in the
same rounds: audit minus (c) is what the preflight and report plays cost, (c) against ping what the node task costs.

Measured per run:
  wall_s      from start to exit of the ansible command.
  cpu_s       controller CPU (user+sys): os.wait4 on the ansible process gives its whole waited-for tree
              (ansible, its forks, their ssh clients); the ControlPersist masters daemonise away from that tree,
              so this script is made a child subreaper (PR_SET_CHILD_SUBREAPER), collects them, closes them after
              the command and adds their rusage (cpu_masters_s, part of cpu_s). The sshd servers and everything
              they run (the remote Python of every module) are children of this script, not of ansible, and are
              NOT counted: only the controller side is. In the local mode (N=1, connection local) there is no
              such split: the module processes are ansible's children and are counted.
  node_cpu_s  the node side, for information: CPU of the sshd servers and everything they ran (per-connection sshd,
              shells, the remote module Pythons), read from the listeners' cutime/cstime once the connections ended.
              Here controller and nodes share this machine's cores, so the wall times include node work that a real
              fleet spreads over N machines: compare wall with cpu_s and node_cpu_s in mind.
  maxrss_mb   ru_maxrss of the tree: the largest single process (not a sum).
  tree_pss_mb the peak of the summed PSS (proportional set size: shared pages divided among their users) of
              the ansible tree plus its masters, sampled every --pss-interval s (0 disables sampling).
  results_per_host  task result lines (ok/changed/skipping/failed/...) of the output, divided by N.
  load        the machine's load average (1, 5, 15 min, os.getloadavg) before and after each run, printed with it:
              controller and nodes share this machine with whatever else runs on it, and the load says how much.
Each pair (one round) gives its own audit/ping ratios of wall, controller CPU and node CPU; per N the benchmark prints
and writes their spread (min / median / max over the pairs, and every pair's value with the load of its two runs)
beside the ratios of the medians. The goals are judged on the median of the pairs' ratios; the spread says how far
one pair can be from it.
Written to OUT.json (rewritten after every size, so a run stopped later keeps the sizes done): machine (nproc, python,
ansible-core, date), per size and command the samples and medians, audit/ping ratios of wall, CPU and CPU per host,
and the seconds (and CPU seconds) per added host between consecutive sizes for both; the issue's goals (one node audit <= 1.5x ping; fleet audit at the
largest N <= 2x a ping sweep, linear in N, controller CPU per host <= 3x ping's) are evaluated at the end.
Needs the collection importable by ansible (source scripts/dev-env.sh); a --playbook from another checkout
uses that checkout's collection. A global wall-clock limit (--time-limit) stops everything, exit status 3.
"""
import argparse
import atexit
import ctypes
import datetime
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SSHD = "/usr/sbin/sshd"
PR_SET_CHILD_SUBREAPER = 36
RESULT_LINE = re.compile(r"^(ok|changed|skipping|failed|fatal|unreachable|included): \[([^\]\s]+)", re.M)
PING_OK = re.compile(r"^\S+ \| SUCCESS", re.M)
PING_LINE = re.compile(r"^\S+ \| (SUCCESS|CHANGED|FAILED!|UNREACHABLE!)", re.M)


class Stop(Exception):
    """The time limit or a signal: stop everything."""

    def __init__(self, why, status):
        Exception.__init__(self, why)
        self.status = status


class RunFailed(Exception):
    pass


def log(msg):
    sys.stderr.write("[bench_fleet %s] %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


def address(i):
    """The loopback address of host i (0-based): 127.0.0.2 ... 127.0.0.254, then 127.0.1.2 ..."""
    return "127.0.%d.%d" % (i // 253, 2 + i % 253)


# ---------------------------------------------------------------------------------------------- the lab
class Lab(object):
    """Temp dir, sshd servers, node trees; everything it starts is stopped by close() (idempotent)."""

    def __init__(self, args):
        self.args = args
        self.tmp = tempfile.mkdtemp(prefix="fleetbench-")
        self.sshd = []           # Popen of every sshd
        self.sshd_pids = set()
        self.current = None      # Popen of the ansible command running now
        self.closed = False
        self.run_seq = 0

    # -- teardown
    def close(self):
        if self.closed:
            return
        self.closed = True
        if self.current is not None and self.current.returncode is None:
            _kill_group(self.current.pid)
        self.reap_orphans()
        for p in self.sshd:
            if p.poll() is None:
                try:
                    p.terminate()
                except OSError:
                    pass
        deadline = time.time() + 5
        for p in self.sshd:
            try:
                p.wait(max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.reap_orphans()
        if self.args.keep:
            log("kept %s" % self.tmp)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def orphans(self):
        """Our children that are not sshd servers: ControlPersist masters (and anything else of ansible's tree
        that outlived it), reparented to us as the subreaper."""
        me = os.getpid()
        running = self.current.pid if self.current is not None else None
        return [pid for pid, ppid in _ppids().items() if ppid == me and pid not in self.sshd_pids and pid != running]

    def node_cpu(self, settle=10.0):
        """CPU seconds of the node side so far: every sshd listener's own and its waited-for children's (cutime, cstime
        of /proc/PID/stat: the per-connection sshd, the shells and the remote module Pythons, once ended). Waits up to
        ``settle`` s for the connections just closed to end."""
        deadline = time.time() + settle
        while time.time() < deadline and any(ppid in self.sshd_pids for ppid in _ppids().values()):
            time.sleep(0.05)
        ticks = 0
        for p in self.sshd:
            try:
                with open("/proc/%d/stat" % p.pid) as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                ticks += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
            except (OSError, ValueError, IndexError):
                pass
        return ticks / float(os.sysconf("SC_CLK_TCK"))

    def reap_orphans(self):
        """Terminate and wait for the orphans; returns (user+sys s, maxrss KiB, count)."""
        cpu, rss, pids = 0.0, 0, self.orphans()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError:
                pass
        for pid in pids:
            try:
                ru = _wait4_timeout(pid, 5.0)[2]
            except ChildProcessError:
                continue
            cpu += ru.ru_utime + ru.ru_stime
            rss = max(rss, ru.ru_maxrss)
        return cpu, rss, len(pids)

    # -- set-up
    def setup(self, hosts):
        t0 = time.time()
        if not os.path.isfile(SSHD) or not os.access(SSHD, os.X_OK):
            raise SystemExit("bench_fleet: %s is missing: install openssh-server (apt-get install -y openssh-server)" % SSHD)
        if os.geteuid() != 0:
            raise SystemExit("bench_fleet: must run as root (mknod for the node trees, sshd for root login)")
        # privilege separation directory of sshd; root-owned, not group/world writable
        if not os.path.isdir("/run/sshd"):
            os.makedirs("/run/sshd", 0o755)
        self.keys = os.path.join(self.tmp, "keys")
        os.makedirs(self.keys)
        self.client_key = os.path.join(self.keys, "client")
        _check(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", self.client_key])
        self.authorized = os.path.join(self.keys, "authorized_keys")
        shutil.copy(self.client_key + ".pub", self.authorized)
        sys.path.insert(0, os.path.join(self.args.repo, "tests", "unit", "fixtures", "host"))
        from hostfixture import build_node  # noqa: E402 (the checkout's fixture, on the path only now)
        self.trees = []
        for i in range(hosts):
            tree = os.path.join(self.tmp, "nodes", "node%03d" % (i + 1))
            build_node(tree, gpus=self.args.gpus, procfs=True)
            _write_cdi_spec(tree, self.args.gpus)
            self.trees.append(tree)
        self.local_tree = os.path.join(self.tmp, "nodes", "local")
        build_node(self.local_tree, gpus=self.args.gpus, procfs=True)
        _write_cdi_spec(self.local_tree, self.args.gpus)
        self.start_sshd(hosts)
        self.write_config()
        self.setup_s = time.time() - t0
        log("%d sshd and node trees ready in %.1f s (%s)" % (hosts, self.setup_s, self.tmp))

    def start_sshd(self, hosts):
        port = self.args.port
        for i in range(hosts):
            addr = address(i)
            d = os.path.join(self.tmp, "sshd", addr)
            os.makedirs(d)
            hostkey = os.path.join(d, "ssh_host_ed25519_key")
            _check(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", hostkey])
            cfg = os.path.join(d, "sshd_config")
            with open(cfg, "w") as f:
                f.write(SSHD_CONFIG.format(port=port, addr=addr, hostkey=hostkey, pid=os.path.join(d, "sshd.pid"),
                                           authorized=self.authorized))
            if i == 0:
                r = subprocess.run([SSHD, "-t", "-f", cfg], capture_output=True, text=True, check=False)
                if r.returncode:
                    raise SystemExit("bench_fleet: sshd -t rejects the generated config: %s" % (r.stderr or r.stdout).strip())
            err = open(os.path.join(d, "sshd.log"), "w")
            p = subprocess.Popen([SSHD, "-D", "-e", "-f", cfg], stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                                 start_new_session=True)
            err.close()
            self.sshd.append(p)
            self.sshd_pids.add(p.pid)
        deadline = time.time() + 30
        for i, p in enumerate(self.sshd):
            while True:
                if p.poll() is not None:
                    with open(os.path.join(self.tmp, "sshd", address(i), "sshd.log")) as f:
                        raise SystemExit("bench_fleet: sshd on %s:%d exited %s: %s" % (address(i), port, p.returncode, f.read().strip()))
                try:
                    socket.create_connection((address(i), port), timeout=1).close()
                    break
                except OSError:
                    if time.time() > deadline:
                        raise SystemExit("bench_fleet: sshd on %s:%d does not answer" % (address(i), port))
                    time.sleep(0.05)

    def write_config(self):
        self.cfg = os.path.join(self.tmp, "ansible.cfg")
        for d in ("remote-tmp", "local-tmp", "cp", "reports", "logs", "inv"):
            os.makedirs(os.path.join(self.tmp, d), exist_ok=True)
        with open(self.cfg, "w") as f:
            f.write(ANSIBLE_CFG.format(forks=self.args.forks, remote_tmp=os.path.join(self.tmp, "remote-tmp"),
                                       local_tmp=os.path.join(self.tmp, "local-tmp"), cp=os.path.join(self.tmp, "cp"),
                                       compression="-C " if self.args.ssh_compression else ""))
        if self.args.parts:
            # the verify play of verify-gpu.yml alone (no preflight, no report): audit minus this is their share
            self.verify_only = os.path.join(self.tmp, "verify-only.yml")
            with open(self.verify_only, "w") as f:
                f.write(VERIFY_ONLY)

    def inventory(self, n):
        path = os.path.join(self.tmp, "inv", "hosts-%d.yml" % n)
        common = "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o IdentitiesOnly=yes -o LogLevel=ERROR"
        hosts = {}
        for i in range(n):
            hosts["node%03d" % (i + 1)] = {"ansible_host": address(i), "verify_root": self.trees[i]}
        inv = {"all": {"vars": {
            "ansible_connection": "ssh", "ansible_port": self.args.port, "ansible_user": "root",
            "ansible_ssh_private_key_file": self.client_key, "ansible_python_interpreter": self.args.python,
            "ansible_ssh_common_args": common, "verify_nvml": False, "verify_k8s": False}, "hosts": hosts}}
        with open(path, "w") as f:
            yaml.safe_dump(inv, f, default_flow_style=False)
        return path

    def local_inventory(self):
        path = os.path.join(self.tmp, "inv", "local.yml")
        inv = {"all": {"hosts": {"localhost": {
            "ansible_connection": "local", "ansible_python_interpreter": self.args.python,
            "verify_root": self.local_tree, "verify_nvml": False, "verify_k8s": False}}}}
        with open(path, "w") as f:
            yaml.safe_dump(inv, f, default_flow_style=False)
        return path

    # -- one measured command
    def measure(self, label, argv, n, check):
        self.run_seq += 1
        tag = "%03d-%s-%d" % (self.run_seq, label, n)
        cp = os.path.join(self.tmp, "cp", "%03d" % self.run_seq)  # short: the ControlPath is a unix socket (108 bytes)
        os.makedirs(cp)
        reports = os.path.join(self.tmp, "reports", tag)
        argv = [a.replace("@REPORTS@", reports) for a in argv]
        logfile = os.path.join(self.tmp, "logs", tag + ".log")
        env = dict(os.environ, ANSIBLE_CONFIG=self.cfg, ANSIBLE_SSH_CONTROL_PATH_DIR=cp, ANSIBLE_HOST_KEY_CHECKING="False",
                   ANSIBLE_RETRY_FILES_ENABLED="False", ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0")
        if self.args.collections_path:
            env["ANSIBLE_COLLECTIONS_PATH"] = self.args.collections_path
        env.pop("ANSIBLE_CALLBACKS_ENABLED", None)
        sampler = PssSampler(self, self.args.pss_interval)
        node_before = self.node_cpu()
        load_before = [round(x, 2) for x in os.getloadavg()]
        with open(logfile, "w") as out:
            t0 = time.perf_counter()
            self.current = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                                            cwd=self.tmp, start_new_session=True)
            sampler.start()
            try:
                status, ru = os.wait4(self.current.pid, 0)[1:]
            finally:
                sampler.stop()
            wall = time.perf_counter() - t0
        self.current.returncode = os.waitstatus_to_exitcode(status)
        rc = self.current.returncode
        self.current = None
        m_cpu, m_rss, masters = self.reap_orphans()
        node = self.node_cpu() - node_before
        with open(logfile) as f:
            text = f.read()
        sample = {"ok": True, "rc": rc, "wall_s": round(wall, 3), "load_before": load_before,
                  "load_after": [round(x, 2) for x in os.getloadavg()],
                  "cpu_s": round(ru.ru_utime + ru.ru_stime + m_cpu, 3),
                  "cpu_user_s": round(ru.ru_utime, 3), "cpu_sys_s": round(ru.ru_stime, 3),
                  "cpu_masters_s": round(m_cpu, 3), "masters": masters, "node_cpu_s": round(node, 2),
                  "maxrss_mb": round(max(ru.ru_maxrss, m_rss) / 1024.0, 1),
                  "tree_pss_mb": round(sampler.peak_kb / 1024.0, 1) if sampler.samples else None,
                  "results_per_host": round(len((PING_LINE if argv[0] == "ansible" else RESULT_LINE).findall(text)) / float(n), 2)}
        sample["cpu_per_host_s"] = round(sample["cpu_s"] / n, 4)
        sample["node_cpu_per_host_s"] = round(node / n, 4)
        try:
            check(rc, text, reports, n, sample)
        except RunFailed as e:
            sample["ok"] = False
            sample["error"] = str(e)
            sample["log"] = logfile
            log("FAILED %s: %s\n%s" % (tag, e, text[-3000:]))
        return sample


class PssSampler(object):
    """Peak of the summed PSS of the running command's tree plus the orphaned masters (every --pss-interval s)."""

    def __init__(self, lab, interval):
        self.lab, self.interval = lab, interval
        self.peak_kb, self.samples = 0, 0
        self.done = threading.Event()
        self.thread = None

    def start(self):
        if self.interval > 0:
            self.thread = threading.Thread(target=self.loop, daemon=True)
            self.thread.start()

    def stop(self):
        self.done.set()
        if self.thread is not None:
            self.thread.join()

    def loop(self):
        me = os.getpid()
        wait = min(0.25, self.interval)  # a first sample early, for commands shorter than the interval
        while not self.done.wait(wait):
            wait = self.interval
            children = {}
            for pid, ppid in _ppids().items():
                children.setdefault(ppid, []).append(pid)
            todo = [p for p in children.get(me, []) if p not in self.lab.sshd_pids]
            total = 0
            while todo:
                pid = todo.pop()
                total += _pss_kb(pid)
                todo.extend(children.get(pid, []))
            self.peak_kb = max(self.peak_kb, total)
            self.samples += 1


def _pss_kb(pid):
    """Proportional set size of one process (shared pages divided among their users), KiB; 0 when gone."""
    try:
        with open("/proc/%d/smaps_rollup" % pid) as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


# ------------------------------------------------------------------------------------------ checks
def check_ping(rc, text, reports, n, sample):
    ok = len(PING_OK.findall(text))
    if rc != 0 or ok != n:
        raise RunFailed("ping exit status %s, %d of %d hosts SUCCESS" % (rc, ok, n))


def check_audit(rc, text, reports, n, sample):
    latest = os.path.join(reports, "gpuprobe-report-latest.json")
    if rc != 0:
        raise RunFailed("audit exit status %s" % rc)
    try:
        with open(latest) as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        raise RunFailed("no readable report %s: %s" % (latest, e))
    summary = report.get("summary") or {}
    if summary.get("hosts") != n or len(report.get("hosts") or {}) != n:
        raise RunFailed("report lists %s hosts, not %d" % (summary.get("hosts"), n))
    if summary.get("unreachable") or summary.get("unverifiable"):
        raise RunFailed("report: %s unreachable, %s unverifiable" % (summary.get("unreachable"), summary.get("unverifiable")))
    sample["verdicts"] = (report.get("counts") or {}).get("by_verdict")


# --------------------------------------------------------------------------------------- the runs
VERIFY_ONLY = """\
# written by benchmarks/bench_fleet.py --parts: the verify play of playbooks/verify-gpu.yml alone
- name: Verify GPU-in-container readiness, layer by layer
  hosts: all
  gather_facts: false
  ignore_unreachable: true
  ignore_errors: true
  tasks:
    - name: Verify the layers of this node
      ansible.builtin.import_role:
        name: gpuprobe.layers.verify
        rolespec_validate: false
      vars:
        verify_mode: audit
        verify_cdi_source: node
        verify_spool: true
"""


def check_verify(rc, text, reports, n, sample):
    ok = len(re.findall(r"^ok: \[", text, re.M))
    if rc != 0 or ok != n:
        raise RunFailed("verify play alone: exit status %s, %d of %d hosts ok" % (rc, ok, n))


def run_pair(lab, args, n, inventory, local, order, samples):
    if local:
        ping = ["ansible", "-i", inventory, "localhost", "-c", "local", "-m", "ansible.builtin.ping"]
    else:
        ping = ["ansible", "-i", inventory, "all", "-m", "ansible.builtin.ping"]
    audit = ["ansible-playbook", "-i", inventory, args.playbook, "-e", "gpuprobe_mode=audit", "-e", "gpuprobe_report_dir=@REPORTS@"]
    if args.parts and not local:
        order = tuple(order) + ("verify",) if len(samples.get("ping", [])) % 2 == 0 else ("verify",) + tuple(order)
    for name in order:
        if name == "ping":
            s = lab.measure("ping", ping, n, check_ping)
        elif name == "verify":
            s = lab.measure("verify", ["ansible-playbook", "-i", inventory, lab.verify_only], n, check_verify)
        else:
            s = lab.measure("audit", audit, n, check_audit)
        samples.setdefault(name, []).append(s)
        log("  N=%s%s %-5s %s wall %.2f s  cpu %.2f s (masters %.2f)  node cpu %.2f s  maxrss %.0f MB  tree pss %s MB  results/host %s"
            "  load %s -> %s" % (n, " local" if local else "", name, "ok " if s["ok"] else "FAILED", s["wall_s"], s["cpu_s"],
                                 s["cpu_masters_s"], s["node_cpu_s"], s["maxrss_mb"], s["tree_pss_mb"], s["results_per_host"],
                                 "/".join("%.2f" % x for x in s["load_before"]), "/".join("%.2f" % x for x in s["load_after"])))
    pairs = pair_ratios(samples)
    if pairs and len(samples["ping"]) == len(samples["audit"]) == pairs[-1]["round"]:
        p = pairs[-1]
        log("  N=%s%s pair %d audit/ping: wall %sx  cpu %sx  node cpu %sx" % (
            n, " local" if local else "", len(pairs), p["wall"], p["cpu"], p["node_cpu"]))


def med(samples, key):
    values = [s[key] for s in samples if s["ok"] and s.get(key) is not None]
    return round(statistics.median(values), 4) if values else None


def ratio(a, b):
    return round(a / b, 2) if a is not None and b else None


MEDIANS = ("wall_s", "cpu_s", "cpu_per_host_s", "cpu_masters_s", "node_cpu_s", "node_cpu_per_host_s", "maxrss_mb", "tree_pss_mb",
           "results_per_host")


PAIR_KEYS = (("wall", "wall_s"), ("cpu", "cpu_s"), ("node_cpu", "node_cpu_s"))


def pair_ratios(samples):
    """audit/ping of each round (the two runs of one pair, side by side), for the rounds where both succeeded."""
    out = []
    for r, (p, a) in enumerate(zip(samples.get("ping", []), samples.get("audit", []))):
        if p["ok"] and a["ok"]:
            row = dict((name, ratio(a[key], p[key])) for name, key in PAIR_KEYS)
            row.update(round=r + 1, load=[p["load_before"][0], p["load_after"][0], a["load_before"][0], a["load_after"][0]])
            out.append(row)
    return out


def spread(pairs):
    """min / median / max of each ratio over the pairs."""
    out = {"pairs": len(pairs)}
    for name, _key in PAIR_KEYS:
        values = [p[name] for p in pairs if p[name] is not None]
        out[name] = ({"min": min(values), "median": round(statistics.median(values), 3), "max": max(values)} if values else None)
    loads = [x for p in pairs for x in p["load"]]
    out["load_1min"] = {"min": min(loads), "max": max(loads)} if loads else None
    return out


def summarise(samples, n):
    out = {"hosts": n, "commands": {}}
    for cmd in [c for c in ("ping", "audit", "verify") if samples.get(c)]:
        s = samples[cmd]
        out["commands"][cmd] = {
            "runs": len(s), "failed": sum(1 for x in s if not x["ok"]), "samples": s,
            "median": dict((k, med(s, k)) for k in MEDIANS)}
    p, a = out["commands"]["ping"]["median"], out["commands"]["audit"]["median"]
    out["audit_over_ping"] = {"wall": ratio(a["wall_s"], p["wall_s"]), "cpu": ratio(a["cpu_s"], p["cpu_s"]),
                              "cpu_per_host": ratio(a["cpu_per_host_s"], p["cpu_per_host_s"]),
                              "node_cpu": ratio(a["node_cpu_s"], p["node_cpu_s"]),
                              "tree_pss": ratio(a["tree_pss_mb"], p["tree_pss_mb"])}
    out["pairs"] = pair_ratios(samples)
    out["pair_spread"] = spread(out["pairs"])
    if "verify" in out["commands"]:
        v = out["commands"]["verify"]["median"]
        # where the audit's cost beyond ping goes: the verify play (its one task per node) against ping, and the
        # preflight and report plays (audit minus the verify play alone), each as a fraction of ping's
        out["parts_over_ping"] = dict(
            (key, {"verify_play": ratio(v[key], p[key]),
                   "preflight_and_report": ratio(None if None in (a[key], v[key]) else a[key] - v[key], p[key])})
            for key in ("wall_s", "cpu_s", "cpu_masters_s", "node_cpu_s"))
    return out


def slopes(sizes):
    """Seconds (and CPU seconds) per added host between consecutive sizes, for both commands."""
    out = []
    for lo, hi in zip(sizes, sizes[1:]):
        row = {"from": lo["hosts"], "to": hi["hosts"]}
        dn = float(hi["hosts"] - lo["hosts"])
        for cmd in ("ping", "audit"):
            a, b = lo["commands"][cmd]["median"], hi["commands"][cmd]["median"]
            row[cmd] = dict(("%s_per_host" % k, None if None in (a[k], b[k]) else round((b[k] - a[k]) / dn, 4))
                            for k in ("wall_s", "cpu_s", "node_cpu_s"))
        row["audit_over_ping"] = {"wall_per_host": ratio(row["audit"]["wall_s_per_host"], row["ping"]["wall_s_per_host"]),
                                  "cpu_per_host": ratio(row["audit"]["cpu_s_per_host"], row["ping"]["cpu_s_per_host"])}
        out.append(row)
    return out


def goals(result):
    g = {}
    local = result.get("local")
    if local:
        g["local_audit_wall_le_1.5x_ping"] = {"value": local["audit_over_ping"]["wall"], "limit": 1.5}
    if result["sizes"]:
        big = result["sizes"][-1]
        # issue 36.8: the nightly audit at most 1.2x a ping sweep, wall and controller CPU, at the largest N
        sp = big["pair_spread"]
        # issue 36.8 / 45.4: the nightly audit at most 1.2x a ping sweep, wall and controller CPU, at the largest N: the
        # median of the pairs' ratios, with their spread beside it
        for name in ("wall", "cpu"):
            g["issue45_audit_%s_le_1.2x_ping_at_N=%d" % (name, big["hosts"])] = {
                "value": sp[name]["median"] if sp[name] else None, "limit": 1.2, "spread": sp[name], "pairs": sp["pairs"],
                "load_1min": sp["load_1min"]}
        g["fleet_audit_wall_le_2x_ping_at_N=%d" % big["hosts"]] = {"value": big["audit_over_ping"]["wall"], "limit": 2.0}
        g["fleet_audit_cpu_per_host_le_3x_ping_at_N=%d" % big["hosts"]] = {"value": big["audit_over_ping"]["cpu_per_host"], "limit": 3.0}
    if result["slopes"]:
        per = [s["audit"]["wall_s_per_host"] for s in result["slopes"]]
        walls = ["%d: %s" % (s["hosts"], ratio(s["commands"]["audit"]["median"]["wall_s"], s["hosts"])) for s in result["sizes"]]
        # linear: the seconds per added host of the last segment at most 1.5x those of the first (no superlinear growth)
        g["fleet_audit_linear_in_N"] = {"value": ratio(per[-1], per[0]) if len(per) > 1 else None, "limit": 1.5,
                                        "seconds_per_added_host": per, "wall_s_per_host_at_N": walls}
    for v in g.values():
        v["met"] = None if v["value"] is None else v["value"] <= v["limit"]
    return g


def table(result):
    lines = ["%-9s %-5s %4s %9s %9s %11s %11s %9s %10s %9s" % ("N", "cmd", "ok", "wall s", "cpu s", "cpu/host s", "node cpu s",
                                                               "maxrss MB", "treePSS MB", "res/host")]
    rows = ([("1 local", result["local"])] if result.get("local") else []) + [(str(s["hosts"]), s) for s in result["sizes"]]
    for label, s in rows:
        for cmd in [c for c in ("ping", "audit", "verify") if c in s["commands"]]:
            c = s["commands"][cmd]
            m = c["median"]
            lines.append("%-9s %-5s %4s %9s %9s %11s %11s %9s %10s %9s" % (
                label, cmd, "%d/%d" % (c["runs"] - c["failed"], c["runs"]), m["wall_s"], m["cpu_s"], m["cpu_per_host_s"],
                m["node_cpu_s"], m["maxrss_mb"], m["tree_pss_mb"], m["results_per_host"]))
        r = s["audit_over_ping"]
        lines.append("%-9s audit/ping of the medians: wall %sx  cpu %sx  cpu/host %sx  node cpu %sx  treePSS %sx" % (
            label, r["wall"], r["cpu"], r["cpu_per_host"], r["node_cpu"], r["tree_pss"]))
        sp = s["pair_spread"]
        ranges = ["%s %s" % (name, "%s / %s / %s" % (sp[name]["min"], sp[name]["median"], sp[name]["max"]) if sp[name] else "n/a")
                  for name, _key in PAIR_KEYS]
        loads = "%s-%s" % (sp["load_1min"]["min"], sp["load_1min"]["max"]) if sp["load_1min"] else "n/a"
        lines.append("%-9s audit/ping over %d pairs, min / median / max: %s; load (1 min) %s" % (label, sp["pairs"], "  ".join(ranges), loads))
        for p in s["pairs"]:
            lines.append("%-9s   pair %d: wall %sx  cpu %sx  node cpu %sx  load (1 min) ping %s->%s, audit %s->%s" % (
                label, p["round"], p["wall"], p["cpu"], p["node_cpu"], *p["load"]))
        if s.get("parts_over_ping"):
            parts = s["parts_over_ping"]
            lines.append("%-9s of ping's: the verify play wall %sx cpu %sx (masters %sx, nodes %sx); preflight + report "
                         "wall +%s cpu +%s" % (label, parts["wall_s"]["verify_play"], parts["cpu_s"]["verify_play"],
                                               parts["cpu_masters_s"]["verify_play"], parts["node_cpu_s"]["verify_play"],
                                               parts["wall_s"]["preflight_and_report"], parts["cpu_s"]["preflight_and_report"]))
    for sl in result["slopes"]:
        lines.append("N %d->%d per added host: ping %s s wall, %s s cpu, %s s node cpu | audit %s s wall, %s s cpu, %s s node cpu" % (
            sl["from"], sl["to"], sl["ping"]["wall_s_per_host"], sl["ping"]["cpu_s_per_host"], sl["ping"]["node_cpu_s_per_host"],
            sl["audit"]["wall_s_per_host"], sl["audit"]["cpu_s_per_host"], sl["audit"]["node_cpu_s_per_host"]))
    for k, v in result["goals"].items():
        met = {True: "met", False: "NOT met", None: "n/a"}[v["met"]]
        lines.append("goal %-45s %s (limit %s): %s%s" % (k, v["value"], v["limit"], met, "  (pairs' spread %s)" % v["spread"] if v.get("spread") else ""))
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------- helpers
SSHD_CONFIG = """\
Port {port}
ListenAddress {addr}
HostKey {hostkey}
PidFile {pid}
AuthorizedKeysFile {authorized}
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
UseDNS no
PrintMotd no
X11Forwarding no
MaxStartups 500:30:1000
MaxSessions 200
ClientAliveInterval 0
LogLevel ERROR
Subsystem sftp internal-sftp
"""

ANSIBLE_CFG = """\
# written by benchmarks/bench_fleet.py: the fleet settings of inventory/fleet-example/ansible.cfg
[defaults]
forks = {forks}
gathering = explicit
host_key_checking = False
retry_files_enabled = False
interpreter_python = auto_silent
remote_tmp = {remote_tmp}
local_tmp = {local_tmp}
timeout = 30

[ssh_connection]
pipelining = True
ssh_args = {compression}-o ControlMaster=auto -o ControlPersist=300s -o ServerAliveInterval=15
control_path_dir = {cp}
"""


def _write(path, result):
    with open(path + ".tmp", "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    os.replace(path + ".tmp", path)


def _ppids():
    """pid -> parent pid of every process."""
    out = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    out[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    return out


def _write_cdi_spec(tree, gpus):
    """The node's own nvidia.com/gpu spec (what nvidia-ctk cdi generate would write for the tree's driver)."""
    lib = "/usr/local/nvidia/lib64"
    spec = {"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu",
            "devices": [{"name": str(g), "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia%d" % g}]}} for g in range(gpus)]
            + [{"name": "all", "containerEdits": {"deviceNodes": [{"path": "/dev/nvidia%d" % g} for g in range(gpus)]}}],
            "containerEdits": {
                "deviceNodes": [{"path": "/dev/nvidiactl"}, {"path": "/dev/nvidia-uvm"}, {"path": "/dev/nvidia-uvm-tools"}],
                "mounts": [{"hostPath": "%s/%s.so.580.159.04" % (lib, name), "containerPath": "%s/%s.so.580.159.04" % (lib, name),
                            "options": ["ro", "nosuid", "nodev", "bind"]} for name in ("libcuda", "libnvidia-ml", "libnvidia-ptxjitcompiler")]}}
    os.makedirs(os.path.join(tree, "etc", "cdi"), exist_ok=True)
    with open(os.path.join(tree, "etc", "cdi", "nvidia.yaml"), "w") as f:
        yaml.safe_dump(spec, f, default_flow_style=False)


def _check(argv):
    r = subprocess.run(argv, capture_output=True, text=True, check=False)
    if r.returncode:
        raise SystemExit("bench_fleet: %s failed: %s" % (" ".join(argv), (r.stderr or r.stdout).strip()))


def _kill_group(pid):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pid, sig)
        except OSError:
            return
        try:
            _wait4_timeout(pid, 5.0)
            return
        except ChildProcessError:
            return
        except TimeoutError:
            continue


def _wait4_timeout(pid, timeout):
    """os.wait4 with a deadline: SIGKILL when the process does not exit in time."""
    deadline = time.time() + timeout
    while True:
        got, status, ru = os.wait4(pid, os.WNOHANG)
        if got:
            return got, status, ru
        if time.time() > deadline:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
            return os.wait4(pid, 0)
        time.sleep(0.02)


def _collections_path(playbook):
    """The collection of the playbook's own checkout (a repo with galaxy.yml gpuprobe.layers), ahead of the environment's."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(playbook)))
    env = os.environ.get("ANSIBLE_COLLECTIONS_PATH", "")
    try:
        with open(os.path.join(root, "galaxy.yml")) as f:
            galaxy = yaml.safe_load(f) or {}
    except OSError:
        return env, None
    if (galaxy.get("namespace"), galaxy.get("name")) != ("gpuprobe", "layers"):
        return env, None
    return env, root


def machine(args):
    try:
        ansible = subprocess.run(["ansible", "--version"], capture_output=True, text=True, check=False).stdout.splitlines()[0]
    except (OSError, IndexError):
        ansible = None
    try:
        with open("/proc/meminfo") as f:
            mem = int(f.readline().split()[1]) // 1024
    except (OSError, ValueError, IndexError):
        mem = None
    try:
        head = subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(args.playbook)), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=False).stdout.strip() or None
    except OSError:
        head = None
    ssh = subprocess.run(["ssh", "-V"], capture_output=True, text=True, check=False).stderr.strip()
    return {"nproc": os.cpu_count(), "mem_mb": mem, "python": sys.version.split()[0], "platform": platform.platform(),
            "ansible": ansible, "ssh": ssh, "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "playbook": args.playbook, "playbook_commit": head}


MIN_PAIRS = 3


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out", help="JSON file to write")
    ap.add_argument("--sizes", default="10,50,200", help="comma-separated host counts (default 10,50,200)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds (ping + audit) per size (default 3)")
    ap.add_argument("--large-rounds", type=int, default=3, help="rounds for sizes >= --large (default 3)")
    ap.add_argument("--large", type=int, default=100, help="sizes from this on get --large-rounds (default 100)")
    ap.add_argument("--local-rounds", type=int, default=5, help="rounds of the one-node local mode (default 5)")
    ap.add_argument("--no-local", dest="local", action="store_false", help="skip the one-node local mode")
    ap.add_argument("--forks", type=int, default=20, help="ansible forks (default 20)")
    ap.add_argument("--port", type=int, default=2222, help="sshd port on every loopback address (default 2222)")
    ap.add_argument("--gpus", type=int, default=8, help="GPUs per synthetic node (default 8)")
    ap.add_argument("--time-limit", type=int, default=1500, help="stop everything after this many seconds, exit 3 (default 1500)")
    ap.add_argument("--playbook", default=os.path.join(REPO, "playbooks", "verify-gpu.yml"),
                    help="verify-gpu.yml to run (default: this checkout's); another checkout's uses that checkout's collection")
    ap.add_argument("--python", default=sys.executable, help="ansible_python_interpreter of the nodes (default: this python)")
    ap.add_argument("--pss-interval", type=float, default=1.0, help="seconds between tree PSS samples, 0: none (default 1)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (logs, reports, inventories)")
    ap.add_argument("--ssh-compression", action="store_true",
                    help="ssh -C for both commands (Ansible's default ssh_args; the fleet example leaves it out on a LAN)")
    ap.add_argument("--parts", action="store_true",
                    help="also the verify play alone in the same rounds: audit minus it is the preflight and report plays")
    args = ap.parse_args(argv)
    if min(args.rounds, args.large_rounds, args.local_rounds) < MIN_PAIRS:
        ap.error("--rounds, --large-rounds and --local-rounds: at least %d pairs per N (fewer give no spread to judge a ratio by)" % MIN_PAIRS)
    args.sizes = sorted(set(int(x) for x in args.sizes.split(",") if x.strip()))
    if not args.sizes or args.sizes[0] < 1 or args.sizes[-1] > 253 * 256:
        ap.error("--sizes: host counts between 1 and %d" % (253 * 256))
    args.playbook = os.path.abspath(args.playbook)
    if not os.path.isfile(args.playbook):
        ap.error("--playbook %s: no such file" % args.playbook)
    args.python = os.path.abspath(args.python)
    args.repo = REPO
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    for tool in ("ansible", "ansible-playbook", "ssh", "ssh-keygen"):
        if not shutil.which(tool):
            raise SystemExit("bench_fleet: %s not on PATH (source scripts/dev-env.sh)" % tool)
    t_start = time.time()
    # the ControlPersist masters daemonise out of ansible's tree: as subreaper we get them (and their rusage)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise SystemExit("bench_fleet: prctl(PR_SET_CHILD_SUBREAPER) failed: errno %d" % ctypes.get_errno())
    lab = Lab(args)
    env_path, checkout = _collections_path(args.playbook)
    if checkout:
        link = os.path.join(lab.tmp, "collections", "ansible_collections", "gpuprobe", "layers")
        os.makedirs(os.path.dirname(link))
        os.symlink(checkout, link)
        env_path = os.path.join(lab.tmp, "collections") + (":" + env_path if env_path else "")
    args.collections_path = env_path
    atexit.register(lab.close)

    def on_signal(signum, _frame):
        raise Stop("signal %d" % signum, 128 + signum)

    def on_alarm(_signum, _frame):
        raise Stop("time limit of %d s reached" % args.time_limit, 3)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(args.time_limit)
    result = {"machine": machine(args), "settings": {
        "sizes": args.sizes, "rounds": args.rounds, "large_rounds": args.large_rounds, "large": args.large,
        "local_rounds": args.local_rounds if args.local else 0, "forks": args.forks, "gpus_per_node": args.gpus, "port": args.port,
        "python": args.python, "collections_path": args.collections_path, "ssh_compression": args.ssh_compression,
        "parts": args.parts}, "local": None, "sizes": [], "slopes": []}
    status, partial = 0, None
    try:
        try:
            lab.setup(args.sizes[-1])
            result["setup_s"] = round(lab.setup_s, 1)
            if args.local:
                log("N=1 local (connection local), %d rounds" % args.local_rounds)
                inv = lab.local_inventory()
                samples = {"ping": [], "audit": []}
                partial = (1, samples, True)
                for r in range(args.local_rounds):
                    run_pair(lab, args, 1, inv, True, ("ping", "audit") if r % 2 == 0 else ("audit", "ping"), samples)
                partial = None
                result["local"] = summarise(samples, 1)
            for n in args.sizes:
                rounds = args.large_rounds if n >= args.large else args.rounds
                log("N=%d over SSH, %d round(s)" % (n, rounds))
                inv = lab.inventory(n)
                samples = {"ping": [], "audit": []}
                partial = (n, samples, False)
                for r in range(rounds):
                    run_pair(lab, args, n, inv, False, ("ping", "audit") if r % 2 == 0 else ("audit", "ping"), samples)
                partial = None
                result["sizes"].append(summarise(samples, n))
                result["slopes"] = slopes(result["sizes"])
                _write(args.out, dict(result, goals=goals(result), partial="written after N=%d" % n))
        except Stop as e:
            log("stopping: %s" % e)
            result["stopped"] = str(e)
            status = e.status
            if partial is not None and (partial[1]["ping"] or partial[1]["audit"]):
                # the finished runs of the size it stopped in (not in the ratios)
                result["interrupted_size"] = dict(summarise(partial[1], partial[0]), local=partial[2])
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            lab.close()
    finally:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    result["goals"] = goals(result)
    result["total_s"] = round(time.time() - t_start, 1)
    failed = sum(c["failed"] for s in ([result["local"]] if result["local"] else []) + result["sizes"] for c in s["commands"].values())
    result["failed_runs"] = failed
    _write(args.out, result)
    print(table(result))
    print("total %.0f s (set-up %s s); %s" % (result["total_s"], result.get("setup_s"), args.out))
    if status == 0 and failed:
        status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
