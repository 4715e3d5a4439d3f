#!/usr/bin/env bash
# Makes headless Chromium ready for the console's browser tests (console/browser_test.go, driven by
# chromedp): installs the Debian package chromium when no chromium is on the PATH. It checks
# before it acts, so running it twice changes nothing.
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
    exit 0
fi
echo "ensure-chromium: installing the Debian package chromium" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >/dev/null
command -v chromium >/dev/null
