#!/usr/bin/env bash
# `skiff s3` with credentials from a fake container endpoint (ECS / EKS Pod Identity style) on
# 127.0.0.1, against the SigV4-checking S3 test server (run through with-s3.sh, which exports
# the server's keys as AWS_*). The keys reach skiff only through the endpoint.
# Prints "N passed, N failed" and exits non-zero on any failure.
set -u
skiff=$1
: "${S3_ENDPOINT:?run through with-s3.sh}" "${S3_BUCKET:?}" "${AWS_ACCESS_KEY_ID:?}" "${AWS_SECRET_ACCESS_KEY:?}"
pass=0; fail=0
tmp=$(mktemp -d)
ok()  { pass=$((pass+1)); echo "ok   $1"; }
bad() { fail=$((fail+1)); echo "FAIL $1"; }
check() { local name=$1; shift; if "$@"; then ok "$name"; else bad "$name"; fi; }

key_id=$AWS_ACCESS_KEY_ID
secret=$AWS_SECRET_ACCESS_KEY
token="container-auth-token-$RANDOM$RANDOM"
printf '%s\n' "$token" > "$tmp/auth"

# The fake endpoint: 401 without the token, else the server's keys with an Expiration in 1 h.
cat > "$tmp/endpoint.py" <<'PY'
import datetime, http.server, json, os, sys
key_id, secret, token, port_file, log = sys.argv[1:6]
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(log, "a") as f:
            f.write(self.path + "\n")
        if self.path != "/creds" or self.headers.get("Authorization") != token:
            self.send_response(401); self.send_header("Content-Length", "0"); self.end_headers(); return
        exp = (datetime.datetime.utcnow() + datetime.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        body = json.dumps({"AccessKeyId": key_id, "SecretAccessKey": secret, "Token": "",
                           "Expiration": exp}).encode()
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body))); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
open(port_file + ".tmp", "w").write(str(s.server_address[1])); os.rename(port_file + ".tmp", port_file)
s.serve_forever()
PY
python3 "$tmp/endpoint.py" "$key_id" "$secret" "$token" "$tmp/port" "$tmp/requests.log" &
endpoint_pid=$!
trap 'kill $endpoint_pid 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 1 100); do [[ -s "$tmp/port" ]] && break; sleep 0.05; done
uri="http://127.0.0.1:$(cat "$tmp/port")/creds"

# Only the container endpoint: no keys in the environment, no ~/.aws, no IMDS.
run() {
  env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_SESSION_TOKEN -u AWS_PROFILE \
    HOME="$tmp/home" AWS_EC2_METADATA_DISABLED=true SKIFF_S3_ENDPOINT="$S3_ENDPOINT" \
    AWS_CONTAINER_CREDENTIALS_FULL_URI="$uri" AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE="$tmp/auth" "$@"
}

echo -n "from a container" > "$tmp/in.txt"
check "put with container credentials" run "$skiff" s3 put "s3://$S3_BUCKET/creds/a.txt" "$tmp/in.txt"
out=$(run "$skiff" s3 ls "s3://$S3_BUCKET/creds/" 2>"$tmp/err"); rc=$?
check "ls with container credentials exits 0" test $rc -eq 0
check "ls lists the key" grep -q "creds/a.txt" <<<"$out"
check "the endpoint was asked" grep -q "^/creds$" "$tmp/requests.log"
check "no secret on stderr" bash -c "! grep -qF -e '$secret' -e '$token' '$tmp/err'"

# A wrong authorization token: one sentence, non-zero, no token in it.
printf 'wrong-token-%s\n' "$RANDOM" > "$tmp/wrong"
out=$(run env AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE="$tmp/wrong" "$skiff" s3 ls "s3://$S3_BUCKET/" 2>&1 >/dev/null); rc=$?
check "wrong token: non-zero exit" test $rc -ne 0
check "wrong token: says HTTP 401" grep -q "HTTP 401" <<<"$out"
check "wrong token: the token is not printed" bash -c "! grep -q 'wrong-token' <<<'$out'"

# IMDS disabled and nothing configured: one clear sentence.
out=$(env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_SESSION_TOKEN -u AWS_PROFILE HOME="$tmp/home" \
  AWS_EC2_METADATA_DISABLED=true "$skiff" s3 ls "s3://$S3_BUCKET/" --s3-endpoint "$S3_ENDPOINT" 2>&1 >/dev/null); rc=$?
check "nothing configured: says no AWS credentials found" bash -c "[ $rc -ne 0 ] && grep -q 'no AWS credentials found' <<<'$out'"

# --print-config names the source, never the secret.
out=$(run "$skiff" serve --s3-bucket "$S3_BUCKET" --s3-path-style --print-config 2>&1)
check "print-config names the container endpoint" grep -q "S3 credentials: container endpoint" <<<"$out"
check "print-config shows no secret" bash -c "! grep -qF -e '$secret' -e '$token' <<<'$out'"

# serve --check lists the bucket with them (a client made on a fresh reactor from the same config).
out=$(run timeout 60 "$skiff" serve --s3-bucket "$S3_BUCKET" --s3-path-style --check --kafka-addr 127.0.0.1:0 \
  --http-addr off 2>&1); rc=$?
check "serve --check passes with container credentials" test $rc -eq 0
check "serve --check shows no secret" bash -c "! grep -qF -e '$secret' -e '$token' <<<'$out'"

echo "$pass passed, $fail failed"
[[ $fail -eq 0 ]]
