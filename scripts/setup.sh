#!/usr/bin/env bash
# Install CVB Studio and everything its tests need, on a fresh Debian/Python 3.11 machine.
#   scripts/setup.sh            the package, the studio and the dev tools
#   CVB_SETUP_BROWSER=1 ...     also Debian's chromium + Playwright (browser tests)
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m pip install --quiet --upgrade pip
python3 -m pip install --quiet -e '.[dev,ivr]'

if [ "${CVB_SETUP_BROWSER:-0}" = "1" ]; then
  if ! command -v chromium >/dev/null 2>&1; then
    apt_install chromium
  fi
  python3 -m pip install --quiet 'playwright>=1.40'
fi
# The exec check's strongest sandbox backend is bubblewrap (cvb_engine/sandbox.py);
# without it the sandbox falls back to unshare, then to plain rlimits.
if [ "$(id -u)" = "0" ] && [ -f /etc/debian_version ] && ! command -v bwrap >/dev/null 2>&1; then
  if ! { apt-get update -qq && apt-get install -y -qq bubblewrap >/dev/null; }; then
    echo "warning: could not install bubblewrap; the sandbox will use a weaker backend" >&2
  fi
fi
mkdir -p data
echo "setup done: try 'cvb lint scenarios' and 'cvb --help'"
