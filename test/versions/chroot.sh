#!/usr/bin/env bash
# test/versions/chroot.sh ROOT COMMAND...: runs COMMAND chrooted into ROOT
# with /proc, /sys, /dev, /dev/pts and /dev/shm mounted there, and
# /var/cache/kwatch-k8s (the control plane's binaries, test/k8s/build.sh)
# bind-mounted read-only when present; returns COMMAND's status.
#
# test/versions/run.sh calls it under `unshare --mount --propagation
# private`, so the mounts live in a mount namespace of their own: the
# host's mount table never sees them, and they vanish with the namespace's
# last process even if this script is killed.  They are also unmounted by
# the EXIT trap, innermost first, so that ROOT can be removed afterwards by
# whoever holds it.  Before that the trap ends every process still running
# with ROOT as its root directory (a server a failed test left behind):
# only processes this script started can have it.  Needs root.
set -euo pipefail
root=$(realpath -e "${1:?usage: chroot.sh ROOT COMMAND...}"); shift
[ $# -gt 0 ] || { echo "chroot.sh: no command" >&2; exit 2; }
[ "$root" != / ] || { echo "chroot.sh: refusing to chroot into /" >&2; exit 2; }
k8s_cache=${KWATCH_K8S_CACHE:-/var/cache/kwatch-k8s}

mounted=()
mnt() {  # mnt TARGET MOUNT-ARGS...: mounts and remembers TARGET
  local target=$1; shift
  mkdir -p "$target"
  mount "$@" "$target"
  mounted+=("$target")
}

cleanup() {
  local pid i
  # processes chrooted into ROOT (started by COMMAND), then the mounts
  for pid in $(ls /proc | grep -E '^[0-9]+$'); do
    [ "$(readlink "/proc/$pid/root" 2>/dev/null)" = "$root" ] && kill -9 "$pid" 2>/dev/null || true
  done
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
    umount "${mounted[$i]}" 2>/dev/null || umount -l "${mounted[$i]}" || true
  done
}
trap cleanup EXIT

mnt "$root/proc" -t proc proc
mnt "$root/sys" -t sysfs -o ro sysfs
mnt "$root/dev" --bind /dev
mnt "$root/dev/pts" --bind /dev/pts
mnt "$root/dev/shm" --bind /dev/shm
if [ -d "$k8s_cache" ]; then
  mnt "$root$k8s_cache" --bind "$k8s_cache"
  mount -o remount,bind,ro "$root$k8s_cache"
fi
# name resolution for apt-get (the archive) inside ROOT
cp -L /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true

rc=0
chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  HOME=/root LANG=C.UTF-8 TERM="${TERM:-dumb}" "$@" || rc=$?
exit $rc
