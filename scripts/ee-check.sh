#!/usr/bin/env bash
# CI stage: the execution environment's build context can be created, and what it installs is what we mean.
#   1. build the collection tarball into .build/ee-dist (what ee/execution-environment.yml installs);
#   2. `ansible-builder create` -> .build/ee (Containerfile + _build/): no image is built, so no registry,
#      no container daemon and no network are assumed;
#   3. check the context: the tarball that ee/requirements.yml names is in it, with galaxy.yml's version; the
#      base image is pinned (not :latest); ansible-builder's own introspect script, run on the installed
#      tarball, reads the collection's declared Python and system requirements.
# ansible-builder comes from requirements-dev.txt (installed into the venv here when it is missing).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
venv=${VIRTUAL_ENV:-$root/.venv}
fail() { echo "ee-check: $*" >&2; exit 1; }

if [ ! -x "$venv/bin/ansible-builder" ]; then
  pin=$(grep -E '^ansible-builder==' requirements-dev.txt || true)
  [ -n "$pin" ] || fail "ansible-builder is not installed and requirements-dev.txt pins no ansible-builder=="
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "$pin"
fi

version=$(sed -n 's/^version: *//p' galaxy.yml)
dist=$root/.build/ee-dist
context=$root/.build/ee
rm -rf "$dist" "$context" "$root/.build/ee-introspect"
mkdir -p "$dist"
"$venv/bin/ansible-galaxy" collection build --force --output-path "$dist" . >/dev/null
tarball=$dist/gpuprobe-layers-$version.tar.gz
[ -f "$tarball" ] || fail "no $tarball after ansible-galaxy collection build"

"$venv/bin/ansible-builder" create -f ee/execution-environment.yml -c "$context" --output-filename Containerfile

# the collection file that the galaxy requirements name is in the context, and it is this version
wanted=$(sed -n 's/^ *- name: *//p' ee/requirements.yml)
[ "$wanted" = "collections/gpuprobe-layers-$version.tar.gz" ] ||
  fail "ee/requirements.yml installs $wanted, galaxy.yml's version is $version"
[ -f "$context/_build/$wanted" ] || fail "$wanted is not in the build context $context/_build"
cmp -s "$tarball" "$context/_build/$wanted" || fail "$context/_build/$wanted differs from $tarball"

# a pinned base image
base=$(sed -n 's/^ARG EE_BASE_IMAGE="\(.*\)"$/\1/p' "$context/Containerfile")
case $base in
  "" | *:latest | *:latest@*) fail "base image '$base' is not pinned to a release" ;;
  *:*) ;;  # a tag, or a digest (sha256:...)
  *) fail "base image '$base' has no tag or digest" ;;
esac

# what ansible-builder's introspection (run in the image build) gets from the installed collection
ANSIBLE_COLLECTIONS_PATH=$root/.build/ee-introspect \
  "$venv/bin/ansible-galaxy" collection install --force -p "$root/.build/ee-introspect" "$tarball" >/dev/null
deps=$("$venv/bin/python" "$context/_build/scripts/introspect.py" introspect "$root/.build/ee-introspect")
echo "$deps"
# (PyYAML is declared too; the introspection drops it as ansible-core already brings it)
for want in "nvidia-ml-py" "grpcio" "protobuf" "kubernetes-client"; do
  grep -q -- "$want" <<<"$deps" || fail "introspection of the collection does not list $want"
done
echo "ee-check: build context in $context (base $base, collection $version); build it with" \
     "ansible-builder build -f ee/execution-environment.yml -c .build/ee -t gpuprobe-ee:$version" >&2
