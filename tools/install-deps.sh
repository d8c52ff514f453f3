#!/bin/bash
# Installs everything microvmd needs to build, run and be tested, from
# Debian's archive (the Cockpit page's npm packages come later, from the
# npm registry, when the build runs npm ci). Idempotent; runs as root.
set -euo pipefail

packages=(
  # build
  build-essential meson ninja-build pkg-config python3
  libsystemd-dev libglib2.0-dev libglib2.0-bin libjson-glib-dev
  gettext libxml2-utils libdbus-1-dev
  # run: the bus, polkit, the hypervisor
  dbus dbus-daemon polkitd pkexec systemd util-linux procps
  # systemd-nspawn and machined: the test of VMMs in systemd scopes
  systemd-container
  qemu-system-x86
  # the guest images: the kernel, its initramfs, the test disks
  busybox-static cpio kmod xz-utils zstd e2fsprogs mmdebstrap
  # container images: pull, unpack; their tests
  skopeo umoci libarchive-dev curl docker-registry
  # networks: bridges and TAPs through NetworkManager
  network-manager libnm-dev iproute2
  # published ports, firewall rules, waking on traffic, DNS; their tests
  nftables libnftables-dev libnetfilter-log-dev libmnl-dev libldns-dev ldnsutils
  dnsmasq-base iputils-ping netcat-openbsd
  # the metrics endpoint; Debian's Prometheus scrapes it in the tests
  libsoup-3.0-dev prometheus
  # the console bridge's TLS (GLib's TLS backend)
  glib-networking
  # tests; the console bridge's client in them
  valgrind python3-websockets openssl
  # the Cockpit page's browser test: Debian's cockpit-ws and cockpit-bridge,
  # Debian's Chromium (driven by playwright-core from npm), dbus-monitor
  cockpit-ws cockpit-bridge chromium dbus-bin
  # fuzzing: clang with libFuzzer and the sanitizer runtimes
  clang-14 libclang-rt-14-dev libfuzzer-14-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# The Cockpit page is built with Node.js and npm: whichever the machine
# has (18 or later), else Debian's.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  command -v node >/dev/null || missing+=(nodejs)
  command -v npm >/dev/null || missing+=(npm)
fi

if [ ${#missing[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
