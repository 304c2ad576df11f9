#!/usr/bin/env bash
# Install Debian's nginx if it is missing: tests/live/test_two_servers.py runs deploy/nginx.conf
# with it, and `bench/web_load.py --proxy nginx` puts it in front of the servers it measures.
# Each of them starts its own nginx (-p/-c on a free port); the system's nginx service is not
# wanted: it is kept from starting while the package installs, and not enabled afterwards.
set -euo pipefail
if command -v nginx >/dev/null || [ -x /usr/sbin/nginx ]; then
  exit 0
fi
echo "Installing Debian's nginx for the reverse-proxy test and benchmark…"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
# Another apt-get (e.g. scripts/ensure-chromium.sh in a parallel make) may hold the lock: wait.
APT=(apt-get -qq -o DPkg::Lock::Timeout=600)
# A policy-rc.d that answers 101 keeps the package's scripts from starting the service (which
# would listen on port 80); an existing one (container images have one) is left as it is.
POLICY=/usr/sbin/policy-rc.d
if [ ! -e "$POLICY" ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$POLICY" >/dev/null
  $SUDO chmod 755 "$POLICY"
  trap '$SUDO rm -f "$POLICY"' EXIT
fi
$SUDO "${APT[@]}" update
DEBIAN_FRONTEND=noninteractive $SUDO "${APT[@]}" install -y --no-install-recommends nginx >/dev/null
# Where systemd runs, keep the service from starting at the next boot as well.
if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
  $SUDO systemctl disable --now nginx >/dev/null 2>&1 || true
fi
/usr/sbin/nginx -v
