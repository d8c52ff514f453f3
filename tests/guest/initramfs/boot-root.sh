#!/bin/bash
# Boots KERNEL + INITRAMFS (built with root-probe as /init) under QEMU TCG
# on -M microvm with DISK as a read-only virtio-blk disk, and passes when
# the probe prints MICROVMD-ROOT-OK: every module that mounting an ext4
# root and an overlay needs was in microvmd.load.
#
#   boot-root.sh KERNEL INITRAMFS DISK
#
# Exits 77 (skipped) when qemu-system-x86_64 is not installed.
set -euo pipefail

if [ $# -ne 3 ]; then
    echo "usage: $0 KERNEL INITRAMFS DISK" >&2
    exit 2
fi
kernel=$1 initramfs=$2 disk=$3

if ! command -v qemu-system-x86_64 >/dev/null 2>&1; then
    echo "qemu-system-x86_64 is not installed" >&2
    exit 77
fi

console=$(mktemp /tmp/boot-root.XXXXXX.log)
trap 'rm -f "$console"' EXIT

# The probe powers off when done; the timeout only catches a hung boot.
status=0
timeout 60 qemu-system-x86_64 -M microvm -accel tcg -m 256 -smp 1 \
    -nodefaults -no-user-config -display none -no-reboot \
    -kernel "$kernel" -initrd "$initramfs" \
    -append "console=ttyS0 tsc_early_khz=2000000 reboot=t panic=-1 quiet" \
    -drive "file=$disk,if=none,id=d0,format=raw,readonly=on" \
    -device virtio-blk-device,drive=d0 \
    -serial "file:$console" </dev/null || status=$?

if grep -q MICROVMD-ROOT-OK "$console" && ! grep -q MICROVMD-ROOT-FAIL "$console"; then
    grep '^root-probe:' "$console" || true
    echo "MICROVMD-ROOT-OK"
    exit 0
fi
echo "the probe did not mount the root (qemu exit $status); console:" >&2
tail -n 30 "$console" >&2
exit 1
