# shellcheck shell=bash
# Shared by the scripts that build microvmd's guest images: fetching
# packages from the Debian archive without installing them, picking the
# Debian cloud kernel, and copying a set of its modules (with everything
# they depend on, in load order) into an initramfs tree.
#
# Sourced by guest/build-initramfs.sh and the scripts of tests/guest/.
# The caller sets "cache" (where downloaded packages are kept) before
# calling fetch_deb.
#
# Environment:
#   MICROVMD_GUEST_KERNEL_PKG  kernel package to use instead of the current
#                              dependency of linux-image-cloud-amd64

# The modules every microvmd guest loads: the virtio transports and
# devices, vsock, the firmware config interface and the power button,
# and virtio-mem, through which a resize adds memory to a running guest.
# Their dependencies are added by kernel_install_modules.
guest_virtio_modules=(
    virtio_ring virtio virtio_mmio
    virtio_pci_modern_dev virtio_pci_legacy_dev virtio_pci
    virtio_blk virtio_console failover net_failover virtio_net
    vsock vmw_vsock_virtio_transport_common vmw_vsock_virtio_transport
    virtio_mem
    qemu_fw_cfg
    button evdev
)

log() { echo "${0##*/}: $*" >&2; }
die() { log "error: $*"; exit 1; }

apt_updated=0
apt_update_once() {
    if [ "$apt_updated" = 0 ]; then
        apt_updated=1
        log "running apt-get update"
        apt-get update -q >&2
    fi
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

# The real name of the kernel package, e.g. linux-image-6.1.0-57-cloud-amd64.
resolve_kernel_pkg() {
    if [ -n "${MICROVMD_GUEST_KERNEL_PKG:-}" ]; then
        echo "$MICROVMD_GUEST_KERNEL_PKG"
        return
    fi
    apt-cache depends linux-image-cloud-amd64 2>/dev/null |
        sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*-cloud-amd64\)$/\1/p' | head -n1
}

candidate_version() { # candidate_version PACKAGE -> its candidate version
    apt-cache policy "$1" 2>/dev/null | awk '/^ *Candidate: / && $2 != "(none)" { print $2; exit }'
}

# package_version VAR PACKAGE: sets VAR to the version apt would install,
# updating the package lists once if apt knows none.
package_version() {
    local v
    v=$(candidate_version "$2")
    if [ -z "$v" ]; then
        apt_update_once
        v=$(candidate_version "$2")
    fi
    [ -n "$v" ] || die "no installable version of $2"
    printf -v "$1" '%s' "$v"
}

# kernel_select: sets kpkg and kver, the kernel package and its version.
kernel_select() {
    kpkg=$(resolve_kernel_pkg)
    if [ -z "$kpkg" ]; then
        apt_update_once
        kpkg=$(resolve_kernel_pkg)
    fi
    [ -n "$kpkg" ] || die "cannot resolve linux-image-cloud-amd64 (is the Debian archive in sources.list?)"
    package_version kver "$kpkg"
}

# fetch_deb PACKAGE VERSION -> prints the path of the .deb in $cache.
# The cache is locked: scripts that share one may run at the same time.
fetch_deb() {
    mkdir -p "$cache"
    fetch_deb_locked "$@" 8>"$cache/.lock"
}

fetch_deb_locked() {
    local pkg=$1 ver=$2 f
    flock 8
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

# kernel_unpack DEB DIR: unpacks the kernel package into DIR and sets
# krel (the kernel release), kimage (its vmlinuz), kdir (its module
# directory, ending in /) and modpath (module name -> path under kdir).
kernel_unpack() {
    local f rel name
    mkdir -p "$2"
    dpkg-deb -x "$1" "$2"
    kdir=$(ls -d "$2/lib/modules/"*/ 2>/dev/null | head -n1)
    [ -n "$kdir" ] || die "$kpkg has no /lib/modules"
    krel=$(basename "$kdir")
    kimage=$2/boot/vmlinuz-$krel
    [ -f "$kimage" ] || die "$kpkg has no /boot/vmlinuz-$krel"
    declare -gA modpath=()
    while IFS= read -r f; do
        rel=${f#"$kdir"}
        name=$(basename "$rel")
        name=${name%%.ko*}
        name=${name//-/_}
        modpath[$name]=$rel
    done < <(find "$kdir/kernel" -name '*.ko*')
    case " ${modpath[*]} " in *.ko.xz\ *) need_tool xz xz-utils ;; esac
    case " ${modpath[*]} " in *.ko.zst\ *) need_tool zstd zstd ;; esac
}

builtin_mod() { # is the module built into the kernel?
    grep -q -E "/$1\.ko\$|/${1//_/-}\.ko\$" "$kdir/modules.builtin" 2>/dev/null
}

module_cat() { # module_cat PATH: the module, uncompressed, on stdout
    case "$1" in
        *.ko) cat "$1" ;;
        *.ko.xz) xz -dc "$1" ;;
        *.ko.zst) zstd -dcq "$1" ;;
        *.ko.gz) gzip -dc "$1" ;;
        *) die "unknown module format: $1" ;;
    esac
}

module_deps() { # the modules named in the module's own "depends=" field
    module_cat "$kdir/${modpath[$1]}" |
        tr '\0' '\n' | sed -n 's/^depends=//p' | head -n1 | tr ',' ' '
}

# module_visit NAME: appends NAME to module_order after its dependencies.
# A module built into the kernel needs no file and is left out.
module_visit() {
    local m=${1//-/_} d
    case "${module_state[$m]:-}" in
        done) return ;;
        visiting) die "module dependency cycle at $m" ;;
    esac
    if [ -z "${modpath[$m]:-}" ]; then
        if builtin_mod "$m"; then
            module_state[$m]=done
            return
        fi
        die "module $m is neither built in nor shipped in $kpkg"
    fi
    module_state[$m]=visiting
    for d in $(module_deps "$m"); do
        module_visit "$d"
    done
    module_state[$m]=done
    module_order+=("$m")
}

# kernel_install_modules ROOT MODULE...: writes ROOT/lib/modules/$krel with
# the modules (uncompressed, as NAME.ko) and their dependencies, and
# microvmd.load listing them one a line in load order.
kernel_install_modules() {
    local root=$1 m mdir
    shift
    declare -gA module_state=()
    module_order=()
    for m in "$@"; do
        module_visit "$m"
    done
    mdir=$root/lib/modules/$krel
    mkdir -p "$mdir"
    : > "$mdir/microvmd.load"
    for m in "${module_order[@]}"; do
        module_cat "$kdir/${modpath[$m]}" > "$mdir/$m.ko"
        echo "$m.ko" >> "$mdir/microvmd.load"
    done
    cp "$kdir/modules.builtin" "$mdir/" 2>/dev/null || true
    log "modules: ${module_order[*]}"
}

# cpio_pack ROOT OUT: ROOT as a gzip'd newc cpio owned by root, with every
# time set to 0 so that the same tree gives the same bytes.
cpio_pack() {
    find "$1" -exec touch -h -d @0 {} +
    (cd "$1" && find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --reproducible --quiet) |
        gzip -9 -n > "$2"
}

# finish_stamp FILE: touches FILE (if given) for build systems.
finish_stamp() {
    if [ -n "$1" ]; then
        mkdir -p "$(dirname "$1")"
        touch "$1"
    fi
}
