#!/usr/bin/env bash
# Ctrl-C in the middle of a probe, on a node with podman (the GPU end-to-end run calls this):
#   1. start playbooks/verify-gpu.yml (full, self-built spec) in a session of its own;
#   2. as soon as its probe container runs, send SIGINT to that whole process group (what Ctrl-C in a terminal does);
#   3. list what is left in /var/run/cdi and in podman, run gpuprobe.layers.probe_cleanup (the owner is gone now),
#      and list again.
# Usage: interrupt-drill.sh REPORT.txt RUN.log [extra ansible-playbook arguments]
# Exit status 0 when a probe container was running at the interrupt and nothing of the project's is left after
# the cleanup (no labelled container, no gpuprobe-*.yaml); 1 otherwise (also when the run never got to a probe).
set -uo pipefail
report=${1:?usage: interrupt-drill.sh REPORT.txt RUN.log [ansible-playbook args]}
runlog=${2:?usage: interrupt-drill.sh REPORT.txt RUN.log [ansible-playbook args]}
shift 2
leftovers() {
  echo "/var/run/cdi:"; ls -la /var/run/cdi 2>&1
  echo "probe containers:"; podman ps -a --filter label=gpuprobe.run --format '{{.Names}} {{.Status}} {{.Labels}}'
}
setsid ansible-playbook -i "localhost," -c local playbooks/verify-gpu.yml -e gpuprobe_mode=full \
  -e gpuprobe_cdi_source=self-built "$@" >"$runlog" 2>&1 &
pid=$!
polls=0
while [ "$polls" -lt 600 ] && [ -z "$(podman ps -q --filter label=gpuprobe.run)" ] && kill -0 "$pid" 2>/dev/null; do
  sleep 0.1; polls=$((polls + 1))
done
seen=$(podman ps -q --filter label=gpuprobe.run)
{
  echo "probe container running after $polls polls of 0.1 s:"; leftovers
  kill -INT -- "-$pid" 2>/dev/null
  wait "$pid"; echo "ansible-playbook exit status after SIGINT: $?"
  echo "=== right after the interrupt"; leftovers
  echo "=== probe_cleanup"
  ansible localhost -c local "$@" -m gpuprobe.layers.probe_cleanup 2>&1
  echo "=== after probe_cleanup"; leftovers
} >"$report" 2>&1
cat "$report"
[ -n "$seen" ] || { echo "interrupt-drill: no probe container ran before the interrupt (see $runlog)" >&2; exit 1; }
[ -z "$(podman ps -aq --filter label=gpuprobe.run)" ] && ! ls /var/run/cdi/gpuprobe-*.yaml >/dev/null 2>&1
