#!/usr/bin/env bash
# Idempotent set-up on a fresh Debian 12 machine (Python >= 3.11): system packages, a virtualenv with the
# pinned requirements (requirements-dev.txt), and the collection built with ansible-galaxy and installed
# under .build/collections/ansible_collections/gpuprobe/layers. Writes .build/env.sh for the callers.
# Never touches drivers, kernel modules, /etc/cdi or the system's containers.conf.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=$root/.build
venv=$root/.venv
mkdir -p "$build"

# 1. system packages: podman + runc for the runtime/compute layers and their tests
missing=()
command -v podman >/dev/null || missing+=(podman)
command -v runc >/dev/null || missing+=(runc)
command -v conmon >/dev/null || [ -x /usr/libexec/podman/conmon ] || missing+=(conmon)
# with --test (scripts/test.sh): what the test suite needs beyond that (ansible-test sanity's shellcheck),
# gcc with libc6-dev for the engines lab's static sandbox (pause) binary (scripts/engines.sh), and Debian's chromium
# for the browser test of the HTML report (tests/integration/test_report_browser.py, headless)
if [ "${1:-}" = "--test" ]; then
  command -v shellcheck >/dev/null || missing+=(shellcheck)
  command -v chromium >/dev/null || missing+=(chromium)
  command -v gcc >/dev/null || missing+=(gcc)
  [ -e /usr/include/stdio.h ] || missing+=(libc6-dev)
  # the metrics tests (tests/integration/test_metrics.py): promtool checks the files, node_exporter serves them
  command -v promtool >/dev/null || missing+=(prometheus)
  [ -x /usr/bin/prometheus-node-exporter ] || missing+=(prometheus-node-exporter)
fi
# a bare Debian python3 has no venv/ensurepip until python3-venv is installed
py=${PYTHON:-python3}
[ -x "$venv/bin/python" ] || "$py" -c 'import ensurepip, venv' 2>/dev/null || missing+=(python3-venv)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "bootstrap: installing ${missing[*]} with apt-get" >&2
    apt-get update -qq
    # no package's service is started by the install (prometheus, node_exporter: the tests run the binaries
    # themselves on loopback ports): a policy-rc.d that denies every start, only while installing, when none is there
    policy=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      policy=/usr/sbin/policy-rc.d
      printf '#!/bin/sh\n# scripts/bootstrap.sh, while it installs packages: no service is started\nexit 101\n' > "$policy"
      chmod 755 "$policy"
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" uidmap >/dev/null \
      || { [ -z "$policy" ] || rm -f "$policy"; exit 1; }
    [ -z "$policy" ] || rm -f "$policy"
  else
    echo "bootstrap: ${missing[*]} missing and not installable here (not root or no apt-get);" \
         "the runtime and compute layers will report NOT_RUN" >&2
  fi
fi

# 2. the virtualenv with the pinned requirements (re-installed only when requirements-dev.txt changes)
if [ ! -x "$venv/bin/python" ]; then
  "$py" -m venv "$venv"
fi
stamp=$venv/.requirements.sha256
want=$(sha256sum requirements-dev.txt | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r requirements-dev.txt
  echo "$want" > "$stamp"
fi

# 2b. with --test: ansible-core 2.17, the oldest release meta/runtime.yml claims, in a virtualenv of its own
#     (.build/core-2.17): requirements-core-2.17.txt and the node-side libraries at requirements-dev.txt's pins, for
#     scripts/sanity.sh and scripts/smoke.sh (re-installed only when those pins change)
if [ "${1:-}" = "--test" ]; then
  core217=$build/core-2.17
  mapfile -t node_pins < <(grep -E '^(PyYAML|nvidia-ml-py|pynvml|jmespath|grpcio|protobuf)==' requirements-dev.txt)
  want217=$( (cat requirements-core-2.17.txt; printf '%s\n' "${node_pins[@]}") | sha256sum | cut -d' ' -f1)
  if [ ! -x "$core217/bin/ansible-test" ] || [ "$(cat "$core217/.requirements.sha256" 2>/dev/null)" != "$want217" ]; then
    t0=$SECONDS
    rm -rf "$core217"
    "$py" -m venv "$core217"
    "$core217/bin/python" -m pip install -q --disable-pip-version-check -r requirements-core-2.17.txt "${node_pins[@]}"
    echo "$want217" > "$core217/.requirements.sha256"
    echo "bootstrap: ansible-core 2.17 ready in $((SECONDS - t0)) s (.build/core-2.17)" >&2
  fi
fi

# 3. build the collection tarball and install it where ansible and the tests import it from. The installed copy is
#    replaced only when the sources changed (the tarball's MANIFEST.json and FILES.json: every file's sha256): a run of
#    scripts/verify.sh during the test suite (tests/integration/test_verify_script.py) then leaves the copy that other
#    tests are importing in place, instead of removing it for a moment
rm -rf "$build/dist.new"
mkdir -p "$build/dist.new"
"$venv/bin/ansible-galaxy" collection build --force --output-path "$build/dist.new" . >/dev/null
manifest=$(tar -xzOf "$build/dist.new"/gpuprobe-layers-*.tar.gz MANIFEST.json FILES.json | sha256sum | cut -d' ' -f1)
if [ "$(cat "$build/collections/.manifest.sha256" 2>/dev/null)" = "$manifest" ] && [ -d "$build/dist" ]; then
  rm -rf "$build/dist.new"
else
  rm -rf "$build/dist" "$build/collections"
  mv "$build/dist.new" "$build/dist"
  mkdir -p "$build/collections"
  # -p with ANSIBLE_COLLECTIONS_PATH naming the same directory (as .build/env.sh does for every run): without it
  # ansible-galaxy warns that the installed collection "will not be picked up"
  ANSIBLE_COLLECTIONS_PATH="$build/collections" \
    "$venv/bin/ansible-galaxy" collection install --force -p "$build/collections" "$build/dist"/gpuprobe-layers-*.tar.gz >/dev/null
  echo "$manifest" > "$build/collections/.manifest.sha256"
fi

# 3b. with --test: the engines lab (containerd and dockerd from Debian 13, docs/runtimes.md), cached under
#     .build/engines; without network the engines tests skip and say so
if [ "${1:-}" = "--test" ]; then
  t0=$SECONDS
  if bash scripts/engines.sh fetch >/dev/null && PYTHON=$venv/bin/python bash scripts/engines.sh stubs >/dev/null; then
    echo "bootstrap: engines ready in $((SECONDS - t0)) s (.build/engines)" >&2
  else
    echo "bootstrap: the engines could not be fetched; tests/integration/test_engines.py will skip" >&2
  fi
fi

# 3c. with --test: the reference CDI readers (Debian 12's CDI 0.5.2 and Debian 13's 0.8.0 built as tiny Go programs from
#     Debian's packages, scripts/cdi-readers.sh), cached under .build/cdi-readers; without network the differential
#     test skips and says so (on CI it fails)
if [ "${1:-}" = "--test" ]; then
  t0=$SECONDS
  if bash scripts/cdi-readers.sh build >/dev/null; then
    echo "bootstrap: CDI reference readers ready in $((SECONDS - t0)) s (.build/cdi-readers)" >&2
  else
    echo "bootstrap: the CDI reference readers could not be built; tests/integration/test_cdi_differential.py will skip" >&2
  fi
fi

# 4. podman settings for development/CI machines without systemd (see docs/lab.md);
#    used through CONTAINERS_CONF by the tests only, never written to /etc
cat > "$build/containers.conf" <<'CONF'
[containers]
default_ulimits = []
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF

cat > "$build/env.sh" <<ENV
export PATH="$venv/bin:\$PATH"
export ANSIBLE_COLLECTIONS_PATH="$build/collections"
export PYTHONPATH="$build/collections\${PYTHONPATH:+:\$PYTHONPATH}"
export GPUPROBE_TEST_CONTAINERS_CONF="$build/containers.conf"
ENV
# sed reads all of ansible's output (head would close the pipe early: a BrokenPipeError traceback)
echo "bootstrap: ready ($("$venv/bin/ansible" --version | sed -n 1p); collection $(ls "$build/dist"))" >&2
