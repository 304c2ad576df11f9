#!/usr/bin/env bash
# Install Debian's Chromium for the Playwright tests if it is missing (Playwright's own browser
# download is not used).
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
echo "Installing Debian's chromium for the browser tests…"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
# Colour emoji as players see them (the daily challenge share card), in screenshots too.
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium fonts-noto-color-emoji >/dev/null
/usr/bin/chromium --version
