#!/bin/bash
# Runs the whole benchmark once and writes OUTDIR/results.json and
# OUTDIR/results.md: microvmd side by side with its baselines (a bare
# sd-bus service, a private libvirtd + libvirt-dbus, raw record writes,
# bare QEMU, skopeo + umoci + mkfs.ext4 against a docker-registry on
# loopback, dnsmasq in a network namespace of row 12's own; rows 13 and
# 14 run the daemon in a network namespace of their own with a
# NetworkManager there; row 15 takes and restores snapshots against the
# same calls made on bare QEMU and on the Cloud Hypervisor and Firecracker
# test VMMs' API sockets; row 18 starts a machine among a thousand others
# against the same start alone, row 19 resizes a Cloud Hypervisor test VMM
# against the same request sent to its API socket; row 20 starts 50
# machines at once against 50 bare Firecracker test VMMs that the bench
# configures itself, and reads and lists while other machines start and
# stop against the same on a daemon where nothing changes), all on one
# private system bus. Runs as root;
# installs what it needs from Debian's archive, builds, builds the test
# guest, microvmd's guest kernel and initramfs and the busybox root disk
# (with its OCI layout, which row 11 boots as an image), and takes
# about 31 minutes on a 2-core machine (row 7 takes 24 of them).
#
#   bench/run.sh OUTDIR
#
# Environment: MICROVMD_BENCH_BUILD_DIR (default: build) is the meson
# build directory used; MICROVMD_BENCH_ARGS adds arguments to the program
# (e.g. --no-libvirt, or --rows 7,10 for only those rows).
set -euo pipefail

if [ $# -ne 1 ]; then
    echo "usage: $0 OUTDIR" >&2
    exit 2
fi
if [ "$(id -u)" != 0 ]; then
    echo "bench/run.sh: run as root (it starts a private system bus, polkitd, libvirtd and QEMU)" >&2
    exit 2
fi

outdir=$(realpath -m "$1")
source_dir=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
cd "$source_dir"
build_dir=$(realpath -m "${MICROVMD_BENCH_BUILD_DIR:-build}")

./tools/install-deps.sh

# The baselines: libvirtd with its QEMU driver, libvirt-dbus and virsh.
bench_packages=(libvirt-daemon libvirt-daemon-driver-qemu libvirt-dbus libvirt-clients)
missing=()
for p in "${bench_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

if [ ! -d "$build_dir" ]; then
    meson setup "$build_dir"
fi
ninja -C "$build_dir"
meson compile -C "$build_dir" test-guest guest-image test-rootfs >/dev/null

mkdir -p "$outdir"
start=$(date +%s)
MICROVMD_SOURCE_DIR="$source_dir" MICROVMD_BUILD_DIR="$build_dir" LANG=C.UTF-8 \
    "$build_dir/bench/microvmd-bench" --out "$outdir" \
    --guest-dir "$build_dir/tests/guest" --agent-guest-dir "$build_dir/guest" \
    --rootfs "$build_dir/tests/guest/rootfs.ext4" ${MICROVMD_BENCH_ARGS:-} 2>"$outdir/bench.log"
echo "bench/run.sh: done in $(( $(date +%s) - start )) s; see $outdir/results.md"
