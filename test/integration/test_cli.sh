#!/usr/bin/env bash
# `skiff s3 ...` and `skiff serve` start-up errors against the SigV4-checking server (run
# through with-s3.sh).
# Prints "N passed, N failed" and exits non-zero on any failure.
set -u
skiff=$1
: "${S3_ENDPOINT:?run through with-s3.sh}" "${S3_BUCKET:?}"
export SKIFF_S3_ENDPOINT=$S3_ENDPOINT
pass=0; fail=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
ok()  { pass=$((pass+1)); echo "ok   $1"; }
bad() { fail=$((fail+1)); echo "FAIL $1"; }
check() { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; fi; }

head -c 200000 /dev/urandom > "$tmp/in.bin"
check "put exits 0" "$skiff" s3 put "s3://$S3_BUCKET/cli/a file+1.bin" "$tmp/in.bin"
check "get to file is byte-exact" bash -c "'$skiff' s3 get 's3://$S3_BUCKET/cli/a file+1.bin' '$tmp/out.bin' && cmp -s '$tmp/in.bin' '$tmp/out.bin'"
check "get to stdout is byte-exact" bash -c "'$skiff' s3 get 's3://$S3_BUCKET/cli/a file+1.bin' - | cmp -s '$tmp/in.bin' -"
check "ranged get" bash -c "[ \"\$('$skiff' s3 get 's3://$S3_BUCKET/cli/a file+1.bin' - --range 10-19 | wc -c)\" = 10 ]"
check "put from stdin" bash -c "echo -n hello | '$skiff' s3 put 's3://$S3_BUCKET/cli/stdin.txt' - 2>/dev/null && [ \"\$('$skiff' s3 get 's3://$S3_BUCKET/cli/stdin.txt' -)\" = hello ]"
check "ls lists both keys" bash -c "'$skiff' s3 ls 's3://$S3_BUCKET/cli/' | grep -q 'cli/a file+1.bin' && '$skiff' s3 ls 's3://$S3_BUCKET/cli/' | grep -q 'cli/stdin.txt'"
check "stat shows the size" bash -c "'$skiff' s3 stat 's3://$S3_BUCKET/cli/a file+1.bin' | grep -q 'size: *200000'"
check "rm exits 0" "$skiff" s3 rm "s3://$S3_BUCKET/cli/stdin.txt"

# Errors: one plain sentence, non-zero exit.
err() { "$skiff" "$@" 2>&1 >/dev/null; }
out=$(err s3 get "s3://$S3_BUCKET/cli/stdin.txt" -); rc=$?
check "missing key: non-zero exit" test $rc -ne 0
check "missing key: says no such key" grep -q "no such key" <<<"$out"
out=$(err s3 ls "s3://no-such-bucket-here/"); rc=$?
check "missing bucket: says no such bucket" bash -c "[ $rc -ne 0 ] && grep -q 'no such bucket' <<<'$out'"
out=$(AWS_SECRET_ACCESS_KEY=wrong-secret-xyz "$skiff" s3 ls "s3://$S3_BUCKET/" 2>&1 >/dev/null); rc=$?
check "wrong secret: says signature rejected" bash -c "[ $rc -ne 0 ] && grep -qi 'signature' <<<'$out'"
check "wrong secret: the secret is not printed" bash -c "! grep -q 'wrong-secret-xyz' <<<'$out'"
check "wrong secret: one line" test "$(wc -l <<<"$out")" -eq 1
# A deadline well past the retries (about 1.5 s of backoff): on a loaded machine a 1.5 s deadline
# could end a backoff sleep first and report the deadline instead of the refused connection.
out=$(err s3 ls "s3://$S3_BUCKET/" --s3-endpoint http://127.0.0.1:1 --timeout-ms 10000); rc=$?
check "unreachable: says cannot connect" bash -c "[ $rc -ne 0 ] && grep -q 'cannot connect to 127.0.0.1:1' <<<'$out'"
out=$(err s3 put "s3://$S3_BUCKET/x" /nonexistent/file); rc=$?
check "unreadable file: non-zero exit" test $rc -ne 0
check "unreadable file: clear error" grep -q "cannot read '/nonexistent/file'" <<<"$out"
out=$(err s3 get "not-a-url"); rc=$?
check "bad url: usage error" bash -c "[ $rc -eq 2 ] && grep -q 'not an s3://' <<<'$out'"
out=$(AWS_ACCESS_KEY_ID= AWS_SECRET_ACCESS_KEY= AWS_EC2_METADATA_DISABLED=true HOME=$tmp "$skiff" s3 ls "s3://$S3_BUCKET/" 2>&1 >/dev/null); rc=$?
check "no credentials: says so" bash -c "[ $rc -ne 0 ] && grep -qi 'credentials' <<<'$out'"

# `skiff serve`: a bad flag or an unreachable store is one sentence and a non-zero exit.
serve_err() { timeout 60 "$skiff" serve --kafka-addr 127.0.0.1:0 --http-addr off --data-dir "$tmp/data" "$@" 2>&1 >/dev/null; }
# expect RC OUT RC_WANTED PATTERN: that exit status, exactly one line, matching PATTERN
expect() { [ "$1" -eq "$3" ] && [ "$(wc -l <<<"$2")" -eq 1 ] && grep -q -- "$4" <<<"$2"; }
out=$(serve_err --segment-bytes lots); rc=$?
check "serve bad number: exit 2, one line naming the flag" expect $rc "$out" 2 "--segment-bytes"
out=$(serve_err --no-such-flag); rc=$?
check "serve unknown flag: exit 2, one line" expect $rc "$out" 2 "unknown flag --no-such-flag"
out=$(serve_err --s3-endpoint http://127.0.0.1:1); rc=$?
check "serve S3 flag without a bucket: exit 2" expect $rc "$out" 2 "needs --s3-bucket"
out=$(serve_err --upload-mode sideways); rc=$?
check "serve bad upload mode: exit 2" expect $rc "$out" 2 "parallel or sequential"
out=$(SKIFF_DEFAULT_PARTITIONS=0 serve_err); rc=$?
check "serve bad env value: exit 2 naming the flag" expect $rc "$out" 2 "--default-partitions"
# No --data-dir with a bucket: given together they are refused as contradictory (exit 2).
serve_s3_err() { timeout 60 "$skiff" serve --kafka-addr 127.0.0.1:0 --http-addr off "$@" 2>&1 >/dev/null; }
out=$(serve_s3_err --s3-bucket "$S3_BUCKET" --s3-endpoint http://127.0.0.1:1 --s3-path-style); rc=$?
check "serve unreachable store: exit 1, one line" expect $rc "$out" 1 "cannot read the store"
out=$(AWS_SECRET_ACCESS_KEY=wrong-secret-xyz serve_s3_err --s3-bucket "$S3_BUCKET" --s3-path-style); rc=$?
check "serve wrong secret: exit 1, says signature" expect $rc "$out" 1 "ignature"
check "serve wrong secret: the secret is not printed" bash -c "! grep -q 'wrong-secret-xyz' <<<\"\$1\"" _ "$out"
check "serve --help lists every flag of the issue" bash -c "h=\$('$skiff' serve --help); for f in kafka-addr advertised-addr http-addr data-dir s3-bucket s3-endpoint s3-region s3-path-style namespace upload-mode flush-linger-ms segment-bytes auto-create-topics default-partitions cores; do grep -q -- \"--\$f\" <<<\"\$h\" || exit 1; done"
# The defaults in --help are read from a default broker_config (and its storage::log_config),
# so they are what the broker does when the flag is absent.
check "serve --help: flush interval default comes from log_config" bash -c "'$skiff' serve --help | grep -q -- '--flush-interval-ms MS .*(default 100)'"
out=$(serve_err --flush-linger-ms soon); rc=$?
check "serve bad --flush-linger-ms: exit 2, says adaptive or a number" expect $rc "$out" 2 "'adaptive' or a number"
out=$(serve_err --put-price-per-1000 -1); rc=$?
check "serve bad --put-price-per-1000: exit 2" expect $rc "$out" 2 "--put-price-per-1000"
out=$(serve_err --max-puts-per-second fast); rc=$?
check "serve bad --max-puts-per-second: exit 2" expect $rc "$out" 2 "--max-puts-per-second"
out=$(serve_err --client-quotas "app:produce=fast"); rc=$?
check "serve bad --client-quotas: exit 2, names the client" expect $rc "$out" 2 "client id 'app' must be a positive byte count"
out=$(serve_err --max-buffered-bytes 10); rc=$?
check "serve too small --max-buffered-bytes: exit 2" expect $rc "$out" 2 "--max-buffered-bytes"
out=$(serve_err --hedge-after-ms never); rc=$?
check "serve bad --hedge-after-ms: exit 2" expect $rc "$out" 2 "'adaptive', 'off' or milliseconds"
check "serve --help: the flush linger defaults to adaptive" bash -c "'$skiff' serve --help | grep -q -- '--flush-linger-ms MS|adaptive .*(default adaptive)'"
check "serve --help: every default is filled in" bash -c "! '$skiff' serve --help | grep -q '(default )'"

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
