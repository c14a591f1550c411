#!/usr/bin/env bash
# Makes `promtool` and `prometheus` available (Debian package `prometheus`),
# for tests/prometheus_exposition.rs and .ci/prometheus-e2e.sh. Does nothing
# when both are already on PATH.
#
#   bash .ci/install-prometheus.sh
set -euo pipefail

if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; then
  echo "install-prometheus: $(promtool --version 2>&1 | head -n 1)"
  exit 0
fi

if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-prometheus: promtool/prometheus missing and apt-get unavailable;" \
       "install Prometheus (it ships promtool) and put both on PATH" >&2
  exit 1
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  sudo="sudo"
fi

echo "install-prometheus: installing Debian's prometheus package"
$sudo apt-get update
# policy-rc.d or the absence of systemd keeps the packaged service from
# starting; the tests start their own server on loopback.
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends prometheus

command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 || {
  echo "install-prometheus: the package installed, but promtool/prometheus are not on PATH" >&2
  exit 1
}
echo "install-prometheus: $(promtool --version 2>&1 | head -n 1)"
