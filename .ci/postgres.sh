#!/usr/bin/env bash
# A throw-away PostgreSQL cluster for the tests (PostgreSQL 15 + contrib from the system packages).
#
#   .ci/postgres.sh start        initdb in a fresh temp folder, start it on a unix socket only,
#                                create the database `cpersona_test` with pg_trgm, print its URL
#   .ci/postgres.sh stop URL     stop that cluster and delete its folder
#   .ci/postgres.sh run CMD...   start one, run CMD with CPERSONA_TEST_DB_URL set to it, stop it
#                                (whatever CMD's outcome); exits with CMD's status. Without a
#                                server and without root to install one, CMD runs alone.
#
# initdb and postgres refuse to run as root (CI runs as root), so both run as the `postgres`
# system user the package creates; the folder is handed to that user. Trust authentication
# on the socket only (no TCP listener): nothing outside this machine can reach the cluster.
# Usage in a test run:
#   export CPERSONA_TEST_DB_URL="$(.ci/postgres.sh start)"; pytest; .ci/postgres.sh stop "$CPERSONA_TEST_DB_URL"
set -euo pipefail

bindir() {
  local found
  found="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
  if { [ -z "$found" ] || [ ! -x "$found/initdb" ]; } && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    # a fresh machine without the server: install it (PostgreSQL + contrib, which holds pg_trgm)
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql postgresql-contrib >&2
    found="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)"
  fi
  if [ -z "$found" ] || [ ! -x "$found/initdb" ]; then
    echo "postgres.sh: no PostgreSQL server found under /usr/lib/postgresql (apt-get install postgresql)" >&2
    exit 1
  fi
  echo "$found"
}

as_postgres() {
  if [ "$(id -u)" = 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

start() {
  local bin dir
  bin="$(bindir)"
  dir="$(mktemp -d /tmp/cpersona-pg.XXXXXX)"
  chmod 755 "$dir"
  [ "$(id -u)" = 0 ] && chown postgres: "$dir"
  as_postgres "$bin/initdb" -D "$dir/data" -U postgres --auth=trust --encoding=UTF8 --locale=C.UTF-8 >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 1; }
  as_postgres "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
    -o "-c listen_addresses='' -c unix_socket_directories='$dir' -c fsync=off -c max_connections=200" start >/dev/null \
    || { cat "$dir/server.log" >&2; exit 1; }
  as_postgres "$bin/psql" -h "$dir" -U postgres -d postgres -qAt \
    -c "CREATE DATABASE cpersona_test" >/dev/null
  as_postgres "$bin/psql" -h "$dir" -U postgres -d cpersona_test -qAt \
    -c "CREATE EXTENSION IF NOT EXISTS pg_trgm" >/dev/null
  echo "postgresql://postgres@/cpersona_test?host=$dir"
}

stop() {
  local url="${1:-${CPERSONA_TEST_DB_URL:-}}" dir bin
  dir="${url##*host=}"
  dir="${dir%%&*}"
  case "$dir" in
    /tmp/cpersona-pg.*) ;;
    *) echo "postgres.sh: '$url' is not a cluster started by this script" >&2; exit 1 ;;
  esac
  bin="$(bindir)"
  if [ -d "$dir/data" ]; then
    as_postgres "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  fi
  rm -rf "$dir"
}

run() {
  local url status
  if [ "$(id -u)" != 0 ] && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    # not root and no server to start: the SQLite side alone (the PostgreSQL tests skip, saying why)
    echo "postgres.sh: no PostgreSQL server installed (apt-get install postgresql postgresql-contrib);" \
         "running without it" >&2
    "$@"
    return
  fi
  url="$(start)"
  status=0
  CPERSONA_TEST_DB_URL="$url" "$@" || status=$?
  stop "$url"
  return "$status"
}

case "${1:-}" in
  start) start ;;
  stop) stop "${2:-}" ;;
  run) shift; [ $# -gt 0 ] || { echo "usage: $0 run CMD..." >&2; exit 2; }; run "$@" ;;
  *) echo "usage: $0 start | stop URL | run CMD..." >&2; exit 2 ;;
esac
