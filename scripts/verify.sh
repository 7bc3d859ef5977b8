#!/usr/bin/env bash
# Installs what is needed (scripts/bootstrap.sh) and runs playbooks/verify-gpu.yml, by default against
# this machine (inventory/localhost.yml). Extra arguments go to ansible-playbook, e.g.
#   bash scripts/verify.sh -i my-inventory.yml -e gpuprobe_mode=postcheck
# ansible-playbook runs in the caller's directory: a relative -i, ./ansible.cfg and a relative ANSIBLE_CONFIG
# are read as the caller means them. inventory/localhost.yml is used only when no inventory is set anywhere
# Ansible reads one from: -i/--inventory/--inventory-file, ANSIBLE_INVENTORY, or the inventory of an
# ansible.cfg (ANSIBLE_CONFIG, ./ansible.cfg, ~/.ansible.cfg, /etc/ansible/ansible.cfg), as
# `ansible-config dump --only-changed` reports it.
# Exit status (docs/usage.md, "Exit statuses"): ansible-playbook's, except that a report that could not be
# written exits 3 (ansible-playbook says 2 there, as for a failed node):
#   0  every node was verified (reached a verdict) and the report was written; in audit/full a node that is
#      not COMPUTE_VERIFIED is a finding in the report, not an error
#   1  --limit matches no host of the inventory (Ansible's own error, before any play)
#   2  invalid options (nothing ran), a host pattern that selects no node within -i and --limit (nothing ran),
#      a node that could not be verified (unreachable, no usable Python), or, in postcheck mode, a node that
#      is not COMPUTE_VERIFIED
#   3  the report could not be written (no file of this run kept; reports/*-latest.* are the previous run's)
#   other values: Ansible itself failed
# --help, --version, --syntax-check, --list-hosts, --list-tasks and --list-tags run no play: their status is
# ansible-playbook's own. The report lands in ./reports/ of this repository (gpuprobe_report_dir).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
(cd "$root" && bash scripts/bootstrap.sh)
# shellcheck source=/dev/null
source "$root/.build/env.sh"
# one line per node as it finishes (nodes done / total, its outcome and cause), the hosts by cause at the end; the
# aggregate callback does the same next to a stdout callback of the user's (it stays silent next to ours)
export ANSIBLE_STDOUT_CALLBACK=${ANSIBLE_STDOUT_CALLBACK:-gpuprobe.layers.fleet}
export ANSIBLE_CALLBACKS_ENABLED=${ANSIBLE_CALLBACKS_ENABLED:-gpuprobe.layers.gpuprobe_summary}
inventory=(-i "$root/inventory/localhost.yml")
for a in "$@"; do
  case $a in -i|-i?*|--inventory|--inventory=*|--inventory-file|--inventory-file=*) inventory=() ;; esac
done
if [ "${#inventory[@]}" -gt 0 ] && ansible-config dump --only-changed 2>/dev/null | grep -q '^DEFAULT_HOST_LIST('; then
  inventory=()   # ANSIBLE_INVENTORY or an ansible.cfg names the inventory
fi
status_dir=$(mktemp -d)
trap 'rm -rf "$status_dir"' EXIT
rc=0
ansible-playbook "${inventory[@]}" "$root/playbooks/verify-gpu.yml" -e "gpuprobe_report_dir=$root/reports" \
  -e "gpuprobe_status_file=$status_dir/status.json" "$@" || rc=$?
if [ -f "$status_dir/status.json" ] && grep -q '"report": "failed"' "$status_dir/status.json"; then
  echo "verify.sh: the report could not be written (exit 3): $(grep '"error"' "$status_dir/status.json")" >&2
  exit 3
fi
exit "$rc"
