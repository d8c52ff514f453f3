#!/bin/bash
# Build the microvmd test guest: a Debian cloud kernel plus a busybox
# initramfs whose /init is tests/guest/init.
#
#   build.sh OUTDIR [STAMPFILE]
#
# Leaves OUTDIR/vmlinuz and OUTDIR/initrd.img.  If they are already there
# and OUTDIR/guest.stamp matches this script, the init, the kernel package
# and the busybox package, nothing is rebuilt.  STAMPFILE, if given, is
# touched at the end (for build systems).  Downloaded packages are kept in
# OUTDIR/cache.
#
# Everything comes from the Debian archive through apt-get.  Only the host
# tools are installed (cpio, if missing); the kernel and busybox-static are
# downloaded and unpacked, never installed.
#
# Environment:
#   MICROVMD_GUEST_KERNEL_PKG  kernel package to use instead of the current
#                              dependency of linux-image-cloud-amd64
set -euo pipefail
shopt -s inherit_errexit

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
    echo "usage: $0 OUTDIR [STAMPFILE]" >&2
    exit 2
fi

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
outdir=$1
stampfile=${2:-}
init_src=$here/init

# Modules the guest loads.  Their dependencies (from each module's own
# "depends=" field) are added and everything is ordered so that a module
# comes after the modules it needs.
wanted_modules=(
    virtio_ring virtio virtio_mmio
    virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci
    virtio_blk virtio_console failover net_failover virtio_net
    vsock vmw_vsock_virtio_transport_common vmw_vsock_virtio_transport
    qemu_fw_cfg
    button evdev
)

log() { echo "build.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }

apt_updated=0
apt_update_once() {
    if [ "$apt_updated" = 0 ]; then
        apt_updated=1
        log "running apt-get update"
        apt-get update -q >&2
    fi
}

# The real name of the kernel package, e.g. linux-image-6.1.0-57-cloud-amd64.
resolve_kernel_pkg() {
    if [ -n "${MICROVMD_GUEST_KERNEL_PKG:-}" ]; then
        echo "$MICROVMD_GUEST_KERNEL_PKG"
        return
    fi
    apt-cache depends linux-image-cloud-amd64 2>/dev/null |
        sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-cloud-amd64\)$/\1/p' | head -n1
}

# candidate_versions PKG... -> "PKG VERSION" lines (one apt-cache run)
candidate_versions() {
    apt-cache policy "$@" 2>/dev/null |
        awk '/^[^ ].*:$/ { p = substr($0, 1, length($0) - 1) }
             /^ *Candidate: / && $2 != "(none)" { print p, $2 }'
}

need_tool() { # need_tool COMMAND PACKAGE
    command -v "$1" >/dev/null 2>&1 && return 0
    [ "$(id -u)" = 0 ] || die "$1 is missing; install the Debian package $2"
    log "installing $2"
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$2" >&2; then
        apt_update_once
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$2" >&2
    fi
    command -v "$1" >/dev/null 2>&1 || die "$1 still missing after installing $2"
}

# fetch_deb PACKAGE VERSION -> prints the path of the .deb in the cache
fetch_deb() {
    local pkg=$1 ver=$2 f
    mkdir -p "$cache"
    for f in "$cache/${pkg}_"*.deb; do
        [ -e "$f" ] || continue
        if [ "$(dpkg-deb -f "$f" Package)" = "$pkg" ] &&
           [ "$(dpkg-deb -f "$f" Version)" = "$ver" ]; then
            echo "$f"
            return
        fi
    done
    log "downloading $pkg=$ver"
    rm -f "$cache/${pkg}_"*.deb
    # Download into a world-writable scratch dir so apt's _apt sandbox can write.
    local dl
    dl=$(mktemp -d "$cache/dl.XXXXXX")
    chmod 1777 "$dl"
    (cd "$dl" && apt-get download -q "$pkg=$ver" >&2)
    for f in "$dl/"*.deb; do
        [ -e "$f" ] || die "apt-get download $pkg=$ver produced no file"
        mv "$f" "$cache/"
        echo "$cache/$(basename "$f")"
    done
    rmdir "$dl"
}

mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)
cache=$outdir/cache

# One build at a time per OUTDIR.
exec 9>"$outdir/.lock"
flock 9

kpkg=$(resolve_kernel_pkg)
if [ -z "$kpkg" ]; then
    apt_update_once
    kpkg=$(resolve_kernel_pkg)
fi
[ -n "$kpkg" ] || die "cannot resolve linux-image-cloud-amd64 (is the Debian archive in sources.list?)"
versions() {
    vers=$(candidate_versions "$kpkg" busybox-static)
    kver=$(echo "$vers" | awk -v p="$kpkg" '$1 == p { print $2 }')
    bver=$(echo "$vers" | awk '$1 == "busybox-static" { print $2 }')
}
versions
if [ -z "$kver" ] || [ -z "$bver" ]; then
    apt_update_once
    versions
fi
[ -n "$kver" ] || die "no installable version of $kpkg"
[ -n "$bver" ] || die "no installable version of busybox-static"

self_hash=$(cat "${BASH_SOURCE[0]}" "$init_src" | sha256sum | cut -d' ' -f1)
stamp_text="$self_hash $kpkg=$kver busybox-static=$bver"

finish() {
    if [ -n "$stampfile" ]; then
        mkdir -p "$(dirname "$stampfile")"
        touch "$stampfile"
    fi
}

if [ -f "$outdir/vmlinuz" ] && [ -f "$outdir/initrd.img" ] &&
   [ "$(cat "$outdir/guest.stamp" 2>/dev/null)" = "$stamp_text" ]; then
    log "up to date ($kpkg $kver)"
    # Newer than the scripts, for make-like callers that compare times.
    touch -c "$outdir/vmlinuz" "$outdir/initrd.img"
    finish
    exit 0
fi

need_tool cpio cpio
need_tool gzip gzip

work=$(mktemp -d "$outdir/.work.XXXXXX")
trap 'rm -rf "$work"' EXIT

kdeb=$(fetch_deb "$kpkg" "$kver")
bdeb=$(fetch_deb busybox-static "$bver")
mkdir "$work/kernel" "$work/busybox" "$work/root"
dpkg-deb -x "$kdeb" "$work/kernel"
dpkg-deb -x "$bdeb" "$work/busybox"

kdir=$(ls -d "$work/kernel/lib/modules/"*/ 2>/dev/null | head -n1)
[ -n "$kdir" ] || die "$kpkg has no /lib/modules"
krel=$(basename "$kdir")
[ -f "$work/kernel/boot/vmlinuz-$krel" ] || die "$kpkg has no /boot/vmlinuz-$krel"
log "kernel $krel ($kpkg $kver), busybox-static $bver"

# --- modules --------------------------------------------------------------
declare -A modpath=()     # name -> path relative to $kdir
while IFS= read -r f; do
    rel=${f#"$kdir"}
    name=$(basename "$rel")
    name=${name%%.ko*}
    name=${name//-/_}
    modpath[$name]=$rel
done < <(find "$kdir/kernel" -name '*.ko*')
case " ${modpath[*]} " in *.ko.xz\ *) need_tool xz xz-utils ;; esac
case " ${modpath[*]} " in *.ko.zst\ *) need_tool zstd zstd ;; esac

builtin_mod() { # is the module built into the kernel?
    grep -q -E "/$1\.ko\$|/${1//_/-}\.ko\$" "$kdir/modules.builtin" 2>/dev/null
}

module_deps() {
    local f=$kdir/${modpath[$1]}
    case "$f" in
        *.ko) cat "$f" ;;
        *.ko.xz) xz -dc "$f" ;;
        *.ko.zst) zstd -dcq "$f" ;;
        *.ko.gz) gzip -dc "$f" ;;
        *) die "unknown module format: $f" ;;
    esac | tr '\0' '\n' | sed -n 's/^depends=//p' | head -n1 | tr ',' ' '
}

declare -A state=()       # name -> visiting | done
order=()
visit() {
    local m=${1//-/_} d
    case "${state[$m]:-}" in
        done) return ;;
        visiting) die "module dependency cycle at $m" ;;
    esac
    if [ -z "${modpath[$m]:-}" ]; then
        if builtin_mod "$m"; then
            state[$m]=done
            return
        fi
        die "module $m is neither built in nor shipped in $kpkg"
    fi
    state[$m]=visiting
    for d in $(module_deps "$m"); do
        visit "$d"
    done
    state[$m]=done
    order+=("$m")
}
for m in "${wanted_modules[@]}"; do
    visit "$m"
done

mdir=$work/root/lib/modules/$krel
mkdir -p "$mdir"
: > "$mdir/microvmd.load"
for m in "${order[@]}"; do
    rel=${modpath[$m]}
    case "$rel" in
        *.ko) cp "$kdir/$rel" "$mdir/$m.ko" ;;
        *.ko.xz) xz -dc "$kdir/$rel" > "$mdir/$m.ko" ;;
        *.ko.zst) zstd -dcq "$kdir/$rel" > "$mdir/$m.ko" ;;
        *.ko.gz) gzip -dc "$kdir/$rel" > "$mdir/$m.ko" ;;
    esac
    echo "$m.ko" >> "$mdir/microvmd.load"
done
cp "$kdir/modules.builtin" "$mdir/" 2>/dev/null || true
log "modules: ${order[*]}"

# --- root file system -----------------------------------------------------
r=$work/root
mkdir -p "$r/bin" "$r/dev" "$r/proc" "$r/sys" "$r/tmp" "$r/run" "$r/etc" "$r/root"
ln -s bin "$r/sbin"
mkdir -p "$r/usr"
ln -s ../bin "$r/usr/bin"
ln -s ../bin "$r/usr/sbin"
bb=$work/busybox/bin/busybox
[ -x "$bb" ] || die "busybox-static has no /bin/busybox"
cp "$bb" "$r/bin/busybox"
for a in $("$bb" --list); do
    [ "$a" = busybox ] || ln -s busybox "$r/bin/$a"
done
install -m 0755 "$init_src" "$r/init"
echo "root:x:0:0:root:/root:/bin/sh" > "$r/etc/passwd"
echo "root:x:0:" > "$r/etc/group"
printf '%s\n' "$stamp_text" > "$r/etc/microvmd-guest"
# /dev/console, so that the kernel can give /init a console before devtmpfs.
mknod -m 600 "$r/dev/console" c 5 1 2>/dev/null || log "warning: cannot create /dev/console node"
mknod -m 666 "$r/dev/null" c 1 3 2>/dev/null || true

find "$r" -exec touch -h -d @0 {} +
(cd "$r" && find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --reproducible --quiet) |
    gzip -9 -n > "$work/initrd.img"
cp "$work/kernel/boot/vmlinuz-$krel" "$work/vmlinuz"

# --- install --------------------------------------------------------------
rm -f "$outdir/guest.stamp"
mv -f "$work/vmlinuz" "$outdir/vmlinuz"
mv -f "$work/initrd.img" "$outdir/initrd.img"
printf '%s\n' "$krel" > "$outdir/kernel-release"
printf '%s\n' "$stamp_text" > "$outdir/guest.stamp"
log "wrote $outdir/vmlinuz and $outdir/initrd.img ($(du -k "$outdir/initrd.img" | cut -f1) KiB)"
finish
