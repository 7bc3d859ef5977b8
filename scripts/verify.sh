#!/usr/bin/env bash
# Installs what is needed (scripts/bootstrap.sh) and runs playbooks/verify-gpu.yml, by default against
# this machine (inventory/localhost.yml). Extra arguments go to ansible-playbook, e.g.
#   bash scripts/verify.sh -i my-inventory.yml -e gpuprobe_mode=postcheck
# ansible-playbook runs in the caller's directory: a relative -i, ./ansible.cfg and a relative ANSIBLE_CONFIG
# are read as the caller means them. inventory/localhost.yml is used only when no inventory is set anywhere
# Ansible reads one from: -i/--inventory/--inventory-file, ANSIBLE_INVENTORY, or the inventory of an
# ansible.cfg (ANSIBLE_CONFIG, ./ansible.cfg, ~/.ansible.cfg, /etc/ansible/ansible.cfg), as
# `ansible-config dump --only-changed` reports it.
# Exit status: the run's gate (README, "Exit statuses"), from the status file the run writes (gpuprobe_status_file,
# here a temporary file):
#   0  passed: every node was checked and the report was written; in postcheck every node is COMPUTE_VERIFIED (in
#      audit/full a node that is not COMPUTE_VERIFIED is a finding in the report, not an error)
#   1  not_verified: postcheck, a node was checked and is not COMPUTE_VERIFIED
#   2  not_checked: a node could not be checked (unreachable, no usable Python, its node-side call failed)
#   3  report_not_written: the report could not be written (no file of this run kept; reports/*-latest.* are the
#      previous run's)
#   4  the report was written and a later task failed (the opt-in k8s publish)
#   5  invalid_invocation: nothing ran on any node: invalid options, a selection of no node, or ansible-playbook
#      refused the command (--limit matching no host, an unknown command-line option, an unreadable playbook)
#   other values: ansible-playbook's own (99 interrupted, 250 internal error)
# When several apply: 5, 3, 1, 2. The hosts to run again are listed in reports/gpuprobe.retry (--limit @FILE).
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
# the retry file's directory: reports/ of this checkout, also when gpuprobe_report_dir puts the report elsewhere
# (a fresh clone has none until a report was written there)
mkdir -p "$root/reports"
ansible-playbook "${inventory[@]}" "$root/playbooks/verify-gpu.yml" -e "gpuprobe_report_dir=$root/reports" \
  -e "gpuprobe_status_file=$status_dir/status.json" -e "gpuprobe_retry_file=$root/reports/gpuprobe.retry" "$@" || rc=$?
if [ ! -f "$status_dir/status.json" ]; then
  # no play said anything: a command that runs no play (rc 0), ansible-playbook refused it (1, 2 from its usage
  # message, 5), or it was interrupted or failed inside (99, 250, a signal)
  case $rc in
    1|2|5) echo "verify.sh: gate invalid_invocation (exit 5): ansible-playbook stopped before any play (its exit $rc)" >&2; exit 5 ;;
    *) exit "$rc" ;;
  esac
fi
read -r gate code retry < <(python -c 'import json, sys; s = json.load(open(sys.argv[1]))
print(s["status"], int(s["exit_status"]), s.get("retry_file") or "-")' "$status_dir/status.json") \
  || { echo "verify.sh: the status file cannot be read" >&2; exit "$((rc ? rc : 3))"; }
case $rc in
  0|2) ;;
  *) exit "$rc" ;;  # interrupted (99) or an internal error (250) after the status was written
esac
if [ "$code" = 0 ] && [ "$rc" != 0 ]; then
  echo "verify.sh: the report was written (gate passed) and a later task failed, see above (exit 4)" >&2
  exit 4
fi
if [ "$code" = 3 ]; then
  echo "verify.sh: the report could not be written (exit 3): $(python -c 'import json, sys; print(json.load(open(sys.argv[1])).get("error"))' \
    "$status_dir/status.json")" >&2
elif [ "$code" = 1 ] || [ "$code" = 2 ]; then
  echo "verify.sh: gate $gate (exit $code); the hosts to run again (--limit @FILE): $retry" >&2
elif [ "$code" != 0 ]; then
  echo "verify.sh: gate $gate (exit $code)" >&2
fi
exit "$code"
