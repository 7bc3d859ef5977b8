#!/usr/bin/env bash
# Runs every molecule scenario under molecule/ (`molecule test -s <name>`), each with the real roles and
# playbooks on this machine (local connection, synthetic node trees, real podman). Exit status 1 when any
# scenario failed. Expects the environment of scripts/dev-env.sh or .build/env.sh (ANSIBLE_COLLECTIONS_PATH
# pointing at the collection, the venv on PATH); podman reads GPUPROBE_TEST_CONTAINERS_CONF when set.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 1
# the node scenario starts real probe containers: build the probe image first when it is absent (a fresh
# machine has none; the pytest stage would build it too, but it runs after molecule)
[ -z "${GPUPROBE_TEST_CONTAINERS_CONF:-}" ] || export CONTAINERS_CONF=$GPUPROBE_TEST_CONTAINERS_CONF
bash scripts/build-probe-image.sh "${GPUPROBE_PROBE_IMAGE:-localhost/gpuprobe-probe:local}" >&2 \
  || { echo "molecule: cannot build the probe image" >&2; exit 1; }
failed=()
for dir in molecule/*/; do
  name=$(basename "$dir")
  [ -f "$dir/molecule.yml" ] || continue
  echo "=== molecule scenario: $name" >&2
  t0=$SECONDS
  # what the scenario writes besides its results stays under .build and goes with it: molecule's ephemeral
  # directory (else under ~/.cache) and Ansible's controller/module temporary directories (else ~/.ansible/tmp)
  scratch=$root/.build/molecule/$name
  rm -rf "$scratch"; mkdir -p "$scratch/local" "$scratch/remote"
  if MOLECULE_EPHEMERAL_DIRECTORY=$scratch/ephemeral ANSIBLE_LOCAL_TEMP=$scratch/local ANSIBLE_REMOTE_TMP=$scratch/remote \
      molecule test -s "$name"; then
    echo "=== molecule scenario $name: ok ($((SECONDS - t0)) s)" >&2
  else
    echo "=== molecule scenario $name: FAILED ($((SECONDS - t0)) s)" >&2
    failed+=("$name")
  fi
  rm -rf "$scratch"
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "molecule: FAILED scenarios: ${failed[*]}" >&2
  exit 1
fi
