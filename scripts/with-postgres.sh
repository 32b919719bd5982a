#!/usr/bin/env bash
# Run a command with a throwaway PostgreSQL cluster (Debian's PostgreSQL 15: initdb, pg_ctl).
# Exports PREFLAB_TEST_PG_URL for the command; removes the cluster afterwards.
# As root the cluster runs as the `postgres` user (initdb refuses root).
# PREFLAB_PG_PORT: the port to listen on (for machines where only some ports may be used);
# default: a free port chosen by the kernel.
set -euo pipefail

if ! command -v initdb >/dev/null || ! command -v pg_ctl >/dev/null; then
  for d in /usr/lib/postgresql/*/bin; do [ -x "$d/initdb" ] && PATH="$d:$PATH"; done
fi
if ! command -v initdb >/dev/null; then
  echo "with-postgres: initdb not found; install PostgreSQL (apt-get install postgresql) or set PREFLAB_TEST_PG_URL" >&2
  if [ -n "${CI:-}" ]; then exit 1; fi
  exec "$@"
fi

PGTMP="$(mktemp -d /tmp/preflab-pg.XXXXXX)"
PORT="${PREFLAB_PG_PORT:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')}"
if ! [[ "$PORT" =~ ^[0-9]+$ ]] || [ "$PORT" -lt 1 ] || [ "$PORT" -gt 65535 ]; then
  echo "with-postgres: PREFLAB_PG_PORT=$PORT is not a port number (1-65535)" >&2
  exit 2
fi
# runuser keeps the working directory: from one `postgres` cannot read (a checkout under /root)
# every command would print "could not change directory", so the cluster's tools run from /.
as_pg() {
  if [ "$(id -u)" = 0 ]; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}
if [ "$(id -u)" = 0 ]; then chown postgres "$PGTMP"; fi
cleanup() { as_pg pg_ctl -D "$PGTMP/data" -m immediate stop >/dev/null 2>&1 || true; rm -rf "$PGTMP"; }
trap cleanup EXIT

as_pg initdb -D "$PGTMP/data" -A trust -U postgres -E UTF8 >"$PGTMP/initdb.log" 2>&1 \
  || { cat "$PGTMP/initdb.log" >&2; exit 1; }
as_pg pg_ctl -D "$PGTMP/data" -l "$PGTMP/server.log" -w -t 60 \
  -o "-p $PORT -k $PGTMP -c listen_addresses=127.0.0.1 -c max_connections=300 -c fsync=off" start >/dev/null \
  || { cat "$PGTMP/server.log" >&2; exit 1; }

export PREFLAB_TEST_PG_URL="postgresql+psycopg://postgres@127.0.0.1:$PORT/postgres"
echo "with-postgres: PostgreSQL $(as_pg pg_ctl --version | awk '{print $3}') on 127.0.0.1:$PORT" >&2
set +e
"$@"
status=$?
set -e
exit $status
