#!/bin/bash
# Manual check of the Debian guest (tests/guest/build-debian.sh): boots it
# from microvmd's initramfs with root-probe as /init (root_probe.exec: the
# probe mounts the disk with its overlay and executes systemd there) under
# QEMU TCG on -M microvm, waits for systemd to reach multi-user.target,
# presses the ACPI power button and waits for systemd to power off.
#
#   boot-debian.sh KERNEL INITRAMFS DEBIAN_IMAGE
#
# KERNEL and INITRAMFS are tests/guest/initramfs/{vmlinuz,initramfs.img} of
# a build directory.  Takes about 30 s; the console is left in a file whose
# name it prints.
set -euo pipefail

if [ $# -ne 3 ]; then
    echo "usage: $0 KERNEL INITRAMFS DEBIAN_IMAGE" >&2
    exit 2
fi
kernel=$1 initramfs=$2 disk=$3

work=$(mktemp -d /tmp/boot-debian.XXXXXX)
console=$work/console.log
mkfifo "$work/monitor"
# Held open for writing so that QEMU's monitor does not see end of file.
exec 3<>"$work/monitor"

start=$SECONDS
qemu-system-x86_64 -M microvm -accel tcg -m 512 -smp 1 \
    -nodefaults -no-user-config -display none -no-reboot \
    -kernel "$kernel" -initrd "$initramfs" \
    -append "console=ttyS0 tsc_early_khz=2000000 reboot=t panic=-1 root_probe.exec" \
    -drive "file=$disk,if=none,id=d0,format=raw,readonly=on" \
    -device virtio-blk-device,drive=d0 \
    -serial "file:$console" -monitor stdio <&3 >"$work/monitor.log" 2>&1 &
qemu=$!

wait_for() { # wait_for PATTERN SECONDS
    local end=$((SECONDS + $2))
    while [ $SECONDS -lt $end ]; do
        grep -q "$1" "$console" 2>/dev/null && return 0
        kill -0 "$qemu" 2>/dev/null || return 1
        sleep 1
    done
    return 1
}

result=0
if wait_for 'Reached target.*multi-user.target' 180; then
    echo "multi-user.target after $((SECONDS - start)) s"
    echo system_powerdown >&3
    t=$SECONDS
    if wait_for 'reboot: Power down' 60 || ! kill -0 "$qemu" 2>/dev/null; then
        echo "powered off $((SECONDS - t)) s after the power button"
    else
        echo "systemd did not power off after the power button" >&2
        result=1
    fi
else
    echo "systemd did not reach multi-user.target" >&2
    result=1
fi
if kill -0 "$qemu" 2>/dev/null; then
    echo quit >&3
fi
wait "$qemu" || true
grep -a -E 'MICROVMD-ROOT|FAILED|TIME ' "$console" | sed 's/\x1b\[[0-9;]*m//g' || true
echo "console: $console"
exit $result
