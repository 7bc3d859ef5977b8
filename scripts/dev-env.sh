# shellcheck shell=bash
# Source me while developing: the collection is imported from the working tree itself, through
# .build/dev/ansible_collections/gpuprobe/layers -> repo root (no rebuild after each edit).
# scripts/test.sh (and CI) instead test the tarball built by ansible-galaxy.
_gp_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[ -x "$_gp_root/.venv/bin/python" ] || bash "$_gp_root/scripts/bootstrap.sh"
mkdir -p "$_gp_root/.build/dev/ansible_collections/gpuprobe"
ln -sfn "$_gp_root" "$_gp_root/.build/dev/ansible_collections/gpuprobe/layers"
export PATH="$_gp_root/.venv/bin:$PATH"
export ANSIBLE_COLLECTIONS_PATH="$_gp_root/.build/dev"
export PYTHONPATH="$_gp_root/.build/dev${PYTHONPATH:+:$PYTHONPATH}"
export GPUPROBE_TEST_CONTAINERS_CONF="$_gp_root/.build/containers.conf"
unset _gp_root
