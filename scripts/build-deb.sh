#!/usr/bin/env bash
# Builds the Debian package of earlybird (packaging/deb) with dpkg-deb from
# a tree laid out here, then checks it with lintian when it is installed.
#
#   scripts/build-deb.sh                      # cargo build --release, then package
#   scripts/build-deb.sh --binary PATH        # package a binary built before
#   scripts/build-deb.sh --out DIR            # where the .deb goes (default:
#                                             # $CARGO_TARGET_DIR or target, /debian)
#
# The package: /usr/bin/earlybird; the man pages of earlybird and every
# subcommand and the bash, zsh and fish completions, all made by that very
# binary (`earlybird manpages`, `earlybird completions`); the template unit
# earlybird@.service; the Grafana dashboard
# (/usr/share/earlybird/grafana/earlybird.json); /etc/earlybird/example.toml (docs/probe.example.toml)
# and /etc/logrotate.d/earlybird as conffiles; the system user earlybird
# (postinst; postrm purge removes it and its folders). Depends is what
# dpkg-shlibdeps finds the binary linked to, plus adduser.
#
# dpkg-deb rather than cargo-deb: nothing to install from crates.io (a
# cargo-deb build takes minutes on two cores) and the tree is plain to
# read here. Needs dpkg-dev (dpkg-shlibdeps) and binutils (strip).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

binary=""
out="${CARGO_TARGET_DIR:-$ROOT/target}/debian"
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary=$(realpath "$2"); shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "build-deb.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

if [ -z "$binary" ]; then
  cargo build --release -p earlybird-cli
  binary="${CARGO_TARGET_DIR:-$ROOT/target}/release/earlybird"
fi
[ -x "$binary" ] || { echo "build-deb.sh: $binary is not an executable" >&2; exit 1; }
for tool in dpkg-deb dpkg-shlibdeps strip gzip; do
  command -v $tool >/dev/null || { echo "build-deb.sh: $tool is missing (apt-get install dpkg-dev binutils)" >&2; exit 1; }
done

version=$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' Cargo.toml)
arch=$(dpkg --print-architecture)
maintainer="${DEBFULLNAME:-earlybird developers} <${DEBEMAIL:-earlybird@users.noreply.github.com}>"
# The package's dates are the commit's, so that the same commit gives the
# same package.
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)

umask 022
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pkg="$work/earlybird_${version}_${arch}"
P=packaging/deb

# The binary, stripped as Debian's tools strip it.
install -D -m 0755 "$binary" "$pkg/usr/bin/earlybird"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$pkg/usr/bin/earlybird"

# Man pages and completions, from the packaged binary itself.
"$pkg/usr/bin/earlybird" manpages "$work/man" >/dev/null
install -d "$pkg/usr/share/man/man1"
for page in "$work"/man/*.1; do
  gzip -9n -c "$page" >"$pkg/usr/share/man/man1/$(basename "$page").gz"
done
install -d "$pkg/usr/share/bash-completion/completions" "$pkg/usr/share/zsh/vendor-completions" \
  "$pkg/usr/share/fish/vendor_completions.d"
"$pkg/usr/bin/earlybird" completions bash >"$pkg/usr/share/bash-completion/completions/earlybird"
"$pkg/usr/bin/earlybird" completions zsh >"$pkg/usr/share/zsh/vendor-completions/_earlybird"
"$pkg/usr/bin/earlybird" completions fish >"$pkg/usr/share/fish/vendor_completions.d/earlybird.fish"

# The service, the configuration, log rotation.
install -D -m 0644 "$P/earlybird@.service" "$pkg/lib/systemd/system/earlybird@.service"
install -D -m 0644 docs/probe.example.toml "$pkg/etc/earlybird/example.toml"
install -D -m 0644 "$P/earlybird.logrotate" "$pkg/etc/logrotate.d/earlybird"

# The Grafana dashboard of the metrics (--metrics-listen), to import or to
# name in a Grafana provisioning file.
install -D -m 0644 packaging/grafana/earlybird.json "$pkg/usr/share/earlybird/grafana/earlybird.json"

# Documentation: copyright and a changelog in Debian's format (native
# package: the version is the workspace's).
install -D -m 0644 "$P/copyright" "$pkg/usr/share/doc/earlybird/copyright"
{
  echo "earlybird ($version) unstable; urgency=medium"
  echo
  echo "  * Built from commit $commit; the changes are CHANGELOG.md's."
  echo
  echo " -- $maintainer  $(date -R -u -d "@$SOURCE_DATE_EPOCH")"
} | gzip -9n >"$pkg/usr/share/doc/earlybird/changelog.gz"

# Control files.
install -d "$pkg/DEBIAN"
install -m 0755 "$P/postinst" "$P/prerm" "$P/postrm" "$pkg/DEBIAN/"
printf '/etc/earlybird/example.toml\n/etc/logrotate.d/earlybird\n' >"$pkg/DEBIAN/conffiles"
# dpkg-shlibdeps reads debian/control of a source tree: a minimal one.
mkdir -p "$work/src/debian"
printf 'Source: earlybird\n\nPackage: earlybird\nArchitecture: any\n' >"$work/src/debian/control"
shlibs=$(cd "$work/src" && dpkg-shlibdeps -O "$pkg/usr/bin/earlybird" 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
depends="${shlibs:+$shlibs, }adduser"
size=$(du -k -s --exclude=DEBIAN "$pkg" | cut -f1)
sed -e "s|@VERSION@|$version|" -e "s|@ARCH@|$arch|" -e "s|@MAINTAINER@|$maintainer|" \
  -e "s|@SIZE@|$size|" -e "s|@DEPENDS@|$depends|" "$P/control.in" >"$pkg/DEBIAN/control"
(cd "$pkg" && find . -type f ! -path './DEBIAN/*' ! -path './etc/*' -printf '%P\0' | sort -z |
  xargs -0 md5sum) >"$pkg/DEBIAN/md5sums"
chmod 0644 "$pkg/DEBIAN/control" "$pkg/DEBIAN/conffiles" "$pkg/DEBIAN/md5sums"
find "$pkg" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

mkdir -p "$out"
deb="$out/earlybird_${version}_${arch}.deb"
dpkg-deb --root-owner-group -Zxz --build "$pkg" "$deb" >/dev/null

# lintian (apt-get install lintian): no error or warning is left, so none
# is suppressed. Two tags of level "info" remain (lintian -I):
# hardening-no-fortify-functions (Rust code does not call glibc's
# _chk functions; bundled C such as SQLite is built by cargo's cc without
# FORTIFY) and spelling-error-in-binary for a string of a dependency.
if command -v lintian >/dev/null; then
  lintian --fail-on error,warning "$deb" 2> >(grep -v 'running with root privileges' >&2)
else
  echo "build-deb.sh: lintian is not installed; the package was not checked" >&2
fi
echo "$deb"
