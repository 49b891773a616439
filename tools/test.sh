#!/usr/bin/env bash
# Sets up and runs every test: installs what is missing (Debian packages), builds with g++
# (warnings are errors), runs the unit and integration suites (the integration suite starts
# the shared S3 test server and fault proxy itself; the clients suite runs kcat,
# confluent-kafka and kafkajs against `skiff serve`), then builds everything with clang under
# AddressSanitizer + UndefinedBehaviorSanitizer and runs the unit tests and the client tests of
# bad input (Kafka frames, TLS, SASL, ACLs), groups and durability against the sanitized broker,
# then fuzzes for a bounded time.
#   tools/test.sh            everything
#   tools/test.sh --quick    the g++ build and its tests only
set -euo pipefail
cd "$(dirname "$0")/.."
# Tests talk to 127.0.0.1 only: a test that forgets its credentials must fail, not ask the
# EC2 metadata service at 169.254.169.254 (the credential chain's last source).
export AWS_EC2_METADATA_DISABLED=true

tools/install-deps.sh --all

jobs=$(nproc)
if [[ ! -f build/build.ninja ]]; then
  meson setup build --werror -Dbuildtype=debugoptimized >/dev/null
fi
ninja -C build -j "$jobs"
ninja -C build -j "$jobs" checkheaders   # every public header compiles on its own
meson test -C build --print-errorlogs --num-processes "$jobs"

if [[ "${1:-}" == "--quick" ]]; then exit 0; fi

# clang 14 miscompiles coroutines under -fsanitize=function ("Cannot represent a difference
# across sections"), so that one check is left out.
if [[ ! -f build-asan/build.ninja ]]; then
  CXX=clang++-14 meson setup build-asan --werror -Db_sanitize=address,undefined -Db_lundef=false \
    -Dcpp_args=-fno-sanitize=function >/dev/null
fi
ninja -C build-asan -j "$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  meson test -C build-asan --suite unit --print-errorlogs --num-processes "$jobs"
# The broker itself under the sanitizers, driven by real clients and hostile bytes (a report
# aborts the broker, and the tests check its exit status).
for t in test_bad_input test_confluent test_durability; do
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    test/clients/$t.py --skiff build-asan/src/cli/skiff
done
# Transactions: the coordinator's and the partition's coroutines under the sanitizers.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  test/clients/test_transactions.py -k consume_transform_produce -k broker_sigkill -k bad_txn \
  --skiff build-asan/src/cli/skiff
# In cluster mode: markers, offsets and verification between brokers, a coordinator's failover,
# then every broker's clean leave (exit status 0: no sanitizer report).
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  test/clients/test_cluster_transactions.py -k commit_abort -k offsets -k coordinator_sigkill \
  --skiff build-asan/src/cli/skiff
# Iceberg: the sink in `skiff iceberg` (killed at every stage, two at once) and inside the
# broker, single and in a cluster, under the sanitizers.
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
  test/clients/test_iceberg.py -k every_record -k sigkill -k two_sinks -k serve -k cluster \
  --skiff build-asan/src/cli/skiff
# The security bad-input tests (TLS garbage and plaintext on TLS ports, hostile SASL frames,
# expired sessions, malformed ACLs) against the sanitized broker.
for t in "test_tls -k bad_input" "test_sasl -k bad_input" "test_sasl -k session_expiry" "test_acl -k bad_input"; do
  # shellcheck disable=SC2086 # the test name and its -k filter are two words on purpose
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
    test/clients/${t%% *}.py ${t#* } --skiff build-asan/src/cli/skiff
done

# Fuzz the decoders that face untrusted bytes, for a bounded time (seeds from the repo).
if [[ ! -f build-fuzz/build.ninja ]]; then
  CXX=clang++-14 meson setup build-fuzz -Dfuzzers=true -Db_lundef=false -Dtests=true >/dev/null
fi
# name in the build dir : seed folder under test/fuzz/corpus
fuzzers=("test/fuzz/fuzz_formats:formats" "test/fuzz/kafka/fuzz_kafka_request:kafka" "test/fuzz/fuzz_sasl:sasl"
         "test/fuzz/fuzz_iceberg:iceberg")
ninja -C build-fuzz -j "$jobs" "${fuzzers[@]%%:*}"
for entry in "${fuzzers[@]}"; do
  target=build-fuzz/${entry%%:*}; seeds=test/fuzz/corpus/${entry##*:}
  work=$(mktemp -d)
  echo "fuzzing $(basename "$target") for ${SKIFF_FUZZ_SECONDS:-30} s"
  # libFuzzer exits non-zero on a crash, a leak or a sanitizer report: that fails the run.
  "$target" -max_total_time="${SKIFF_FUZZ_SECONDS:-30}" -print_final_stats=1 "$work" "$seeds" 2>&1 | tail -n 4
  rm -rf "$work"
done
