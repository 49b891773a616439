#!/usr/bin/env bash
# Installs the Debian packages skiff needs to build and test. Idempotent and quiet when
# nothing is missing: it asks dpkg first and only calls apt-get for what is absent.
#   tools/install-deps.sh            build + unit test dependencies
#   tools/install-deps.sh --all      also the real Kafka clients and tools integration tests use
set -euo pipefail

build_pkgs=(
  meson ninja-build pkg-config g++ clang-14 libclang-rt-14-dev
  liburing-dev libcurl4-openssl-dev libssl-dev libfmt-dev nlohmann-json3-dev
  catch2 libpugixml-dev ca-certificates python3
  zlib1g-dev libsnappy-dev liblz4-dev libzstd-dev
  libcli11-dev libtomlplusplus-dev
  # skiff sql's query engine (src/sql).
  libsqlite3-dev
  # README's tour reads the metrics endpoint with curl and queries skiff sql with psql.
  curl postgresql-client
  # The unit tests of etcd::gateway_kv start a real etcd (test/unit/etcd/etcd_process.cpp).
  etcd-server
)
test_pkgs=(
  kcat python3-confluent-kafka python3-kafka nodejs npm
  # kafka-python's snappy, lz4 and zstd codecs (test/clients/test_kafka_python.py)
  python3-snappy python3-lz4 python3-zstandard
  curl procps chromium
  # psycopg2 for skiff sql (test/clients/test_sql.py); psql is a build package (the tour's)
  python3-psycopg2
  # meson install checks (test/integration/test_install.sh): unit verification, man page rendering
  systemd man-db groff-base
)

want=("${build_pkgs[@]}")
if [[ "${1:-}" == "--all" ]]; then
  want+=("${test_pkgs[@]}")
fi

missing=()
for p in "${want[@]}"; do
  # A nodejs build that bundles npm (NodeSource's) conflicts with Debian's npm package.
  if [[ $p == npm ]] && command -v npm >/dev/null; then continue; fi
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} > 0)); then
  echo "install-deps: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq >/dev/null
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The kafkajs client tests (test/clients/node): exactly what package-lock.json pins, installed
# again only when node_modules is missing or was installed from another lock file.
if [[ "${1:-}" == "--all" ]]; then
  node_dir=$(cd "$(dirname "$0")/.." && pwd)/test/clients/node
  stamp=$node_dir/node_modules/.skiff-lock.sha256
  want_sum=$(sha256sum <"$node_dir/package-lock.json")
  if [[ ! -f $stamp || "$(cat "$stamp")" != "$want_sum" ]]; then
    echo "install-deps: npm ci in test/clients/node" >&2
    npm ci --prefix "$node_dir" --no-audit --no-fund --loglevel=error >/dev/null
    echo "$want_sum" >"$stamp"
  fi
fi
