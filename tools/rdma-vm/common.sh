# Shared by the test bed's scripts (sourced, not run).
log() { echo "rdma-vm: $*" >&2; }
die() { log "error: $*"; exit 125; }

# Where the prepared kernel, modules and initramfs live: outside any checkout, so every
# clone on this machine shares one setup.
vm_cache_dir() { echo "${RDMA_VM_CACHE:-/var/cache/asio-rdmacm/rdma-vm}/$1"; }

# What the initramfs loads to reach the host's root (dependencies resolved by setup); the
# rest is modprobed by guest-job from the kernel's own module tree.
initramfs_modules="virtio_pci 9pnet_virtio 9p overlay"

# Installs the Debian packages not installed yet (apt-get update first when the lists are
# empty, as on a fresh machine).
apt_install() {
    local missing=() p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    [ ${#missing[@]} = 0 ] && return 0
    log "installing ${missing[*]}"
    ls /var/lib/apt/lists/*_Packages >/dev/null 2>&1 || apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
