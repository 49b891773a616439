#!/bin/sh
# psql (a real libpq peer: GSSENC/SSL negotiation, startup, simple query, errors) against the
# pgwire server over the toy backend. Usage: psql_smoke.sh path/to/pgwire_toy_server
# Exit 77 (skip) without psql.
set -u
server=$1
command -v psql >/dev/null 2>&1 || { echo "SKIP: no psql"; exit 77; }
out=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null; rm -rf "$out"' EXIT
"$server" 60 >"$out/port" 2>"$out/server.log" &
pid=$!
for _ in $(seq 1 100); do [ -s "$out/port" ] && break; sleep 0.05; done
port=$(head -n1 "$out/port")
[ -n "$port" ] || { echo "server did not start"; cat "$out/server.log"; exit 1; }
fail=0
conn="host=127.0.0.1 port=$port user=smoke dbname=test connect_timeout=5"

# sslmode=prefer makes libpq send SSLRequest first and fall back to plain text on 'N'.
got=$(psql "$conn sslmode=prefer" -X -A -t -c "SELECT 3" 2>&1)
[ "$got" = "$(printf '1\n2\n3')" ] || { echo "SELECT 3 via psql: got [$got]"; fail=1; }

got=$(psql "$conn sslmode=disable" -X -A -t -c "SELECT 1; SELECT 2" 2>&1)
[ "$got" = "$(printf '1\n1\n2')" ] || { echo "multi-statement via psql: got [$got]"; fail=1; }

got=$(psql "$conn" -X -v ON_ERROR_STOP=1 -v VERBOSITY=verbose -c "FAIL x" 2>&1)
rc=$?
[ $rc -ne 0 ] || { echo "error statement: psql exit 0"; fail=1; }
echo "$got" | grep -q "42601" || { echo "error statement: no SQLSTATE 42601 in [$got]"; fail=1; }

got=$(psql "$conn" -X -c "SET" 2>&1)
[ "$got" = "SET" ] || { echo "command tag: got [$got]"; fail=1; }

got=$(psql "host=127.0.0.1 port=$port user=smoke dbname=nodb" -X -c "SELECT 1" 2>&1)
echo "$got" | grep -q 'database "nodb" does not exist' || { echo "refused database: got [$got]"; fail=1; }

# sslmode=require must fail: the server refuses TLS.
if psql "$conn sslmode=require" -X -c "SELECT 1" >/dev/null 2>&1; then echo "sslmode=require succeeded"; fail=1; fi

[ $fail -eq 0 ] && echo "psql smoke: ok"
exit $fail
