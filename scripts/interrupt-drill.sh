#!/usr/bin/env bash
# An interrupt in the middle of a run, on a node with podman (the GPU end-to-end run calls this):
#   1. start playbooks/verify-gpu.yml (full, self-built spec) in a session of its own;
#   2. at the chosen moment send the chosen signal to that whole process group (SIGINT is what Ctrl-C in a
#      terminal does; SIGTERM is what a CI job's or AWX's cancel sends):
#        container     as soon as the probe container runs
#        host-control  as soon as the host control (the same probe outside any container) runs
#        report        as soon as the report play writes the report set
#   3. list what is left (/var/run/cdi, labelled containers, the host control's process and temp dirs, the
#      report directory), run gpuprobe.layers.probe_cleanup (the owner is gone now), and list again.
# Usage: interrupt-drill.sh [--at container|host-control|report] [--signal INT|TERM] REPORT.txt RUN.log [ansible-playbook args]
# Exit status 0 when the run reached the chosen moment and nothing of the project's is left after the cleanup (no
# labelled container, no gpuprobe-*.yaml, no host-control process or temp dir, and a report directory whose latest
# set is whole); 1 otherwise (also when the run never got to that moment).
set -uo pipefail
at=container
sig=INT
while [ $# -gt 0 ]; do
  case $1 in
    --at) at=$2; shift 2 ;;
    --signal) sig=$2; shift 2 ;;
    *) break ;;
  esac
done
report=${1:?usage: interrupt-drill.sh [--at WHERE] [--signal SIG] REPORT.txt RUN.log [ansible-playbook args]}
runlog=${2:?usage: interrupt-drill.sh [--at WHERE] [--signal SIG] REPORT.txt RUN.log [ansible-playbook args]}
shift 2
reports=""
for a in "$@"; do
  case $a in gpuprobe_report_dir=*) reports=${a#gpuprobe_report_dir=} ;; esac
done
# the host control: the probe script run outside a container ('gpuprobe_probe.py <config>'; the podman client's argv
# names the same file as a mount source, 'gpuprobe_probe.py:/gpuprobe-<random>/probe.py', which does not match)
host_control() { pgrep -f 'gpuprobe-probe-[^ ]*/gpuprobe_probe\.py( |$)' || true; }
leftovers() {
  echo "/var/run/cdi:"; LC_ALL=C ls -la /var/run/cdi 2>&1
  echo "probe containers:"; podman ps -a --filter label=gpuprobe.run --format '{{.Names}} {{.Status}} {{.Labels}}'
  echo "host-control processes:"; host_control
  echo "probe temp dirs:"; LC_ALL=C ls -d "${TMPDIR:-/tmp}"/gpuprobe-run-* "${TMPDIR:-/tmp}"/gpuprobe-probe-* 2>/dev/null || true
  if [ -n "$reports" ] && [ -d "$reports" ]; then echo "report dir $reports:"; LC_ALL=C find "$reports" -printf "%M %s %p -> %l\n" 2>&1 | head -60; fi
}
reached() {
  case $at in
    container) [ -n "$(podman ps -q --filter label=gpuprobe.run)" ] ;;
    host-control) [ -n "$(host_control)" ] ;;
    report) grep -q 'TASK \[Aggregate every node' "$runlog" 2>/dev/null ;;
    *) echo "interrupt-drill: unknown moment $at" >&2; exit 2 ;;
  esac
}
setsid ansible-playbook -i "localhost," -c local playbooks/verify-gpu.yml -e gpuprobe_mode=full \
  -e gpuprobe_cdi_source=self-built "$@" >"$runlog" 2>&1 &
pid=$!
polls=0
seen=""
while [ "$polls" -lt 3000 ] && kill -0 "$pid" 2>/dev/null; do
  if reached; then seen=yes; break; fi
  sleep 0.02; polls=$((polls + 1))
done
{
  echo "moment '$at' reached: ${seen:-no}, after $polls polls of 0.02 s; sending SIG$sig"; leftovers
  kill "-$sig" -- "-$pid" 2>/dev/null
  wait "$pid"; echo "ansible-playbook exit status after SIG$sig: $?"
  sleep 1
  echo "=== right after the interrupt"; leftovers
  echo "=== probe_cleanup"
  ansible localhost -c local "$@" -m gpuprobe.layers.probe_cleanup 2>&1
  echo "=== after probe_cleanup"; leftovers
} >"$report" 2>&1
cat "$report"
[ -n "$seen" ] || { echo "interrupt-drill: the run never reached '$at' before it ended (see $runlog)" >&2; exit 1; }
ok=0
[ -z "$(podman ps -aq --filter label=gpuprobe.run)" ] || ok=1
! ls /var/run/cdi/gpuprobe-*.yaml >/dev/null 2>&1 || ok=1
[ -z "$(host_control)" ] || ok=1
! ls -d "${TMPDIR:-/tmp}"/gpuprobe-run-* "${TMPDIR:-/tmp}"/gpuprobe-probe-* >/dev/null 2>&1 || ok=1
if [ -n "$reports" ] && [ -d "$reports" ]; then
  ! find "$reports" -name '*.tmp*' -o -name '*.bak*' | grep -q . || ok=1
fi
exit "$ok"
