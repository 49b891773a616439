#!/usr/bin/env bash
# `meson install` into a scratch root: the binary, skiff(1) and the systemd unit land where the
# prefix says; the man page has a section per command `skiff --help` lists and renders without
# roff warnings; systemd-analyze verifies the unit against that root and rates its exposure.
#   test_install.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
fail() { echo "test_install: $*" >&2; exit 1; }

meson install -C "$build" --no-rebuild --quiet --destdir "$root" >/dev/null
prefix=$(meson introspect "$build" --buildoptions | python3 -c \
  'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"]=="prefix"))')
mandir=$(meson introspect "$build" --buildoptions | python3 -c \
  'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"]=="mandir"))')
bin=$root$prefix/bin/skiff
man=$root$prefix/$mandir/man1/skiff.1
unit=$root$prefix/lib/systemd/system/skiff.service

[[ -x $bin ]] || fail "no executable at $bin"
[[ -f $man ]] || fail "no man page at $man"
[[ -f $unit ]] || fail "no systemd unit at $unit"
version=$("$bin" version) || fail "installed binary does not run"
[[ $version == "skiff "* ]] || fail "installed binary says '$version'"

# Every command the binary lists has its section, holding that command's own help text.
# (a command line is indented two spaces; deeper lines continue a description)
commands=$("$bin" --help | awk '/^ *(commands|Subcommands):/{f=1;next} f&&/^  [a-z]/{print $1} f&&/^[^ ]/{f=0}')
[[ -n $commands ]] || fail "skiff --help lists no commands"
checked=0
for c in $commands; do
  [[ $c == help || $c == version ]] && continue
  checked=$((checked + 1))
  grep -q "^\.SS skiff $c\$" "$man" || fail "man page has no section for '$c'"
  # Read the whole help before picking its first line: grep -m1 would close the pipe early
  # and the SIGPIPE fails the script under pipefail.
  help=$("$bin" "$c" --help 2>&1 || true)
  first=$(awk 'NF { print; exit }' <<<"$help" | sed 's/\\/\\e/g')
  grep -qF -- "$first" "$man" || fail "man section '$c' does not hold its help text ('$first')"
done
grep -q '^\.TH SKIFF 1 ' "$man" || fail "man page has no .TH header"
if command -v groff >/dev/null; then
  warnings=$(groff -man -Tutf8 -ww -z "$man" 2>&1 || true)
  [[ -z $warnings ]] || fail "groff warnings: $warnings"
fi

# The unit's ExecStart points at the installed binary, and the hardening it promises is there.
grep -q "^ExecStart=$prefix/bin/skiff serve " "$unit" || fail "ExecStart does not point at $prefix/bin/skiff"
for want in DynamicUser=yes StateDirectory=skiff NoNewPrivileges=yes ProtectSystem=strict ProtectHome=yes \
            PrivateTmp=yes CapabilityBoundingSet= 'SystemCallFilter=@system-service io_uring_setup'; do
  grep -q "^$want" "$unit" || fail "unit lacks $want"
done

# systemd-analyze resolves ExecStart inside --root, so the check sees the installed binary; the
# root gets the host's own units (sysinit.target and friends) and `man skiff` finds the installed
# page through MANPATH (verify runs it for Documentation=man:skiff(1)). Removing either the binary
# or the page makes verify fail.
command -v systemd-analyze >/dev/null || fail "systemd-analyze not installed (tools/install-deps.sh --all)"
mkdir -p "$root/usr/lib/systemd"
cp -a /lib/systemd/system "$root/usr/lib/systemd/"
out=$(MANPATH=$root$prefix/$mandir SYSTEMD_LOG_LEVEL=warning systemd-analyze verify --root="$root" "$unit" 2>&1) ||
  fail "systemd-analyze verify: $out"
[[ -z $out ]] || fail "systemd-analyze verify complains: $out"
# The exposure score (0 = locked down, 10 = unprotected); hardening keeps it low.
score=$(systemd-analyze security --offline=true --root="$root" "$unit" 2>/dev/null |
        grep -o 'Overall exposure level for [^:]*: [0-9.]*' | awk '{print $NF}' | tail -1 || true)
if [[ -n $score ]]; then
  echo "systemd-analyze security: exposure $score"
  awk -v s="$score" 'BEGIN{exit !(s < 3.0)}' || fail "exposure $score is not below 3.0"
fi
echo "test_install: ok (binary, man page with $checked command sections, unit verified)"
