#!/bin/sh
# Build the member sandbox image without a registry: debootstrap a minimal bookworm
# root filesystem, install the packages in packages.txt inside it with apt (as the
# Dockerfile does: the same resolution and configuration order, which debootstrap's
# --include does not get right for a package set as large as npm's), then
# `docker import` it with the same entrypoint, environment and working directory the
# Dockerfile sets.
#
#   sandbox/image/build-rootfs.sh [TAG]     (default skald-sandbox:2; needs root)
set -eu
TAG="${1:-skald-sandbox:2}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SECURITY="${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
HERE="$(cd "$(dirname "$0")" && pwd)"
PACKAGES="$(grep -v '^#' "$HERE/packages.txt" | tr '\n' ' ')"
WORK="$(mktemp -d /tmp/skald-rootfs.XXXXXX)"
ROOT="$WORK/root"
cleanup() {
    umount "$ROOT/proc" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

debootstrap --variant=minbase bookworm "$ROOT" "$MIRROR"
cat > "$ROOT/etc/apt/sources.list" <<SOURCES
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb $SECURITY bookworm-security main
SOURCES
mount -t proc proc "$ROOT/proc"
chroot "$ROOT" apt-get update
# shellcheck disable=SC2086 # one package per word
chroot "$ROOT" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $PACKAGES
chroot "$ROOT" apt-get clean
umount "$ROOT/proc"
rm -rf "$ROOT/var/lib/apt/lists/"* "$ROOT/var/cache/apt/"*.bin \
       "$ROOT/var/cache/apt/archives/"*.deb "$ROOT/usr/share/doc/"* "$ROOT/usr/share/man/"*
mkdir -p "$ROOT/home/member"

tar --numeric-owner -C "$ROOT" -c . | docker import \
    --change 'ENV HOME=/home/member' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
    --change 'WORKDIR /home/member' \
    --change 'ENTRYPOINT ["/usr/bin/tini", "--"]' \
    --change 'CMD ["sleep", "infinity"]' \
    - "$TAG"
echo "built $TAG"
