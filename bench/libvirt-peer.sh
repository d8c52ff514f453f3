#!/bin/bash
# The benchmark's peer: a real libvirtd (qemu:///system) and libvirt-dbus,
# both from Debian's packages, on the bus at $DBUS_SYSTEM_BUS_ADDRESS.
#
#   libvirt-peer.sh DIR
#
# libvirtd runs in mount and network namespaces of its own, with DIR/etc,
# DIR/lib, DIR/cache and DIR/log mounted over /etc/libvirt, /var/lib/libvirt,
# /var/cache/libvirt and /var/log/libvirt and a fresh /run: the host's
# libvirt configuration, state and network are never touched. DIR/etc starts
# as a copy of /etc/libvirt without networks; domain XML files the caller
# puts in DIR/etc/qemu are the defined domains libvirtd loads at start.
#
# libvirt-dbus runs as its packaged user, libvirtdbus, which the packaged
# bus policy lets own org.libvirt. Runs until SIGTERM; logs go to DIR/log.
set -euo pipefail

if [ $# -ne 1 ]; then
    echo "usage: $0 DIR" >&2
    exit 2
fi
dir=$(realpath "$1")
if [ -z "${DBUS_SYSTEM_BUS_ADDRESS:-}" ]; then
    echo "libvirt-peer.sh: DBUS_SYSTEM_BUS_ADDRESS is not set" >&2
    exit 2
fi

if [ "${LIBVIRT_PEER_INSIDE:-}" != 1 ]; then
    mkdir -p "$dir/lib" "$dir/cache" "$dir/log"
    if [ ! -d "$dir/etc" ]; then
        mkdir -p "$dir/etc"
        cp -a /etc/libvirt/. "$dir/etc/"
        rm -rf "$dir/etc/qemu/networks"
        mkdir -p "$dir/etc/qemu"
    fi
    # The socket is private to this run; authentication would only add a
    # one-off cost at connect time.
    cat > "$dir/etc/libvirtd.conf" <<'CONF'
unix_sock_rw_perms = "0777"
unix_sock_ro_perms = "0777"
auth_unix_rw = "none"
auth_unix_ro = "none"
log_outputs = "3:stderr"
CONF
    cat > "$dir/etc/qemu.conf" <<'CONF'
user = "root"
group = "root"
security_driver = "none"
CONF
    exec unshare --mount --net --propagation private \
        env LIBVIRT_PEER_INSIDE=1 "$0" "$@"
fi

mount --bind "$dir/etc" /etc/libvirt
mount --bind "$dir/lib" /var/lib/libvirt
mount --bind "$dir/cache" /var/cache/libvirt
mount --bind "$dir/log" /var/log/libvirt
mount -t tmpfs -o mode=0755 tmpfs /run
mkdir -p /run/libvirt /run/lock

pids=()
stop() {
    for pid in "${pids[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    wait
    exit 0
}
trap stop TERM INT

libvirtd >>"$dir/log/libvirtd.stderr" 2>&1 &
pids+=($!)

for _ in $(seq 1 2000); do
    [ -S /run/libvirt/libvirt-sock ] && break
    kill -0 "${pids[0]}" 2>/dev/null || { echo "libvirt-peer.sh: libvirtd exited" >&2; cat "$dir/log/libvirtd.stderr" >&2; exit 1; }
    sleep 0.005
done

setpriv --reuid=libvirtdbus --regid=libvirtdbus --init-groups \
    libvirt-dbus --system >>"$dir/log/libvirt-dbus.stderr" 2>&1 &
pids+=($!)

wait -n || true
echo "libvirt-peer.sh: a peer process exited" >&2
stop
