#!/usr/bin/env bash
# Renders the /traces/view page (a fixed two-flush scenario written by view_snapshot) in
# headless Chromium from file:// and checks what the page drew: one row per flush with its
# label, bars for build / PUT .kfs / PUT .index / commit and the linked produces, durations,
# the retry mark, the failed-PUT outline and the upload share of the slowest produce.
#   render_view.sh VIEW_SNAPSHOT_BINARY
# Set SKIFF_VIEW_SCREENSHOT=out.png to also save a screenshot.
# Chromium only ever loads the local file; host resolution is disabled.
set -euo pipefail

snapshot_bin=${1:?usage: render_view.sh VIEW_SNAPSHOT_BINARY}
chromium=""
for c in /usr/bin/chromium /usr/bin/chromium-browser; do
  if [[ -x "$c" ]]; then chromium=$c; break; fi
done
if [[ -z "$chromium" ]]; then
  echo "FAIL: /usr/bin/chromium is not installed; this test renders /traces/view in headless Chromium." >&2
  echo "      Install Debian's package: apt-get install -y chromium" >&2
  exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
html="$tmp/view.html"
"$snapshot_bin" "$html"

flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
  --disable-background-networking --disable-component-update --disable-sync
  --disable-default-apps --disable-extensions --no-default-browser-check
  "--host-resolver-rules=MAP * ~NOTFOUND"
  "--user-data-dir=$tmp/profile" --window-size=1400,900)

if ! HOME="$tmp" timeout 120 "$chromium" "${flags[@]}" --dump-dom "file://$html" >"$tmp/dom.html" 2>"$tmp/chromium.log"; then
  echo "FAIL: chromium did not render the page:" >&2
  tail -n 20 "$tmp/chromium.log" >&2
  exit 1
fi
if [[ -n "${SKIFF_VIEW_SCREENSHOT:-}" ]]; then
  HOME="$tmp" timeout 120 "$chromium" "${flags[@]}" "--screenshot=$SKIFF_VIEW_SCREENSHOT" "file://$html" \
    >/dev/null 2>&1 || echo "warning: screenshot failed" >&2
fi

dom="$tmp/dom.html"
failures=0
count() { grep -o -- "$1" "$dom" | wc -l; }
expect_count() { # pattern, expected count, what
  local n
  n=$(count "$1")
  if [[ "$n" -ne "$2" ]]; then
    echo "FAIL: expected $2 × $3 ('$1'), found $n" >&2
    failures=$((failures + 1))
  fi
}
expect_text() { # fixed string, what
  if ! grep -qF -- "$1" "$dom"; then
    echo "FAIL: the rendered page does not show $2 ('$1')" >&2
    failures=$((failures + 1))
  fi
}

# Two flush rows, labelled with topic/partition and total duration.
expect_count 'class="flush-row"' 2 "flush rows"
expect_text 'flush orders/1 · 40.0 ms' "the newer flush's label"
expect_text 'flush orders/0 · 66.0 ms' "the older flush's label"
# Bars: per flush build, two PUTs, commit; plus five linked produces (the unlinked one is not drawn).
expect_count 'class="span-bar' 13 "span bars"
expect_count 'span-bar span-build' 2 "segment build bars"
expect_count 'span-bar span-put-kfs' 2 "PUT .kfs bars"
expect_count 'span-bar span-put-index' 2 "PUT .index bars"
expect_count 'span-bar span-commit' 2 "commit bars"
expect_count 'span-bar span-produce' 5 "linked produce bars"
expect_count 'class="flush-band"' 2 "whole-flush bands"
expect_text '>PUT .kfs 56.0 ms ↻1<' "the retried PUT .kfs with its duration"
expect_text '>PUT .index 16.0 ms<' "PUT .index with its duration"
expect_text '>build 4.00 ms<' "the segment build duration"
expect_text '>commit 6.00 ms<' "the commit duration"
expect_text 'span-put-kfs span-error' "the failed (503) PUT outlined"
expect_text '3 produces, slowest 97.0 ms' "the slowest produce of flush A"
expect_text '<span class="part">PUT .kfs <b>58%</b></span>' "PUT .kfs's share of that produce's latency"
expect_text '2 flushes · 5 linked produces' "the summary"
expect_text 'class="legend-item"' "a legend"
expect_text 'id="status">static snapshot' "the offline note"
if grep -q 'No flush traces' "$dom"; then
  echo "FAIL: the page says it has no flush traces" >&2
  failures=$((failures + 1))
fi

if ((failures)); then
  echo "--- rendered DOM (first 200 lines) ---" >&2
  head -c 20000 "$dom" >&2
  exit 1
fi
echo "ok: /traces/view rendered in $("$chromium" --version 2>/dev/null | head -n1) with 2 flush rows and 13 span bars"
