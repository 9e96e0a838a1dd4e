#!/bin/bash
# The official postgres image's contract, on Debian's PostgreSQL: initialise PGDATA on first
# start from POSTGRES_* variables, run /docker-entrypoint-initdb.d, then serve on all interfaces.
set -euo pipefail

if [ "${1:-postgres}" != postgres ] && [ "${1#-}" = "$1" ]; then
  exec "$@"           # a command that is not the server: run it as given
fi
[ "${1:-}" = postgres ] && shift

POSTGRES_USER=${POSTGRES_USER:-postgres}
POSTGRES_DB=${POSTGRES_DB:-$POSTGRES_USER}
AUTH=${POSTGRES_HOST_AUTH_METHOD:-scram-sha-256}
[ "$AUTH" = md5 ] || [ "$AUTH" = trust ] || [ "$AUTH" = password ] || AUTH=scram-sha-256
as_pg() { runuser -u postgres -- "$@"; }

if [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -z "${POSTGRES_PASSWORD:-}" ] && [ "$AUTH" != trust ]; then
    echo "Error: Database is uninitialized and superuser password is not specified." >&2
    echo "       Set POSTGRES_PASSWORD, or POSTGRES_HOST_AUTH_METHOD=trust." >&2
    exit 1
  fi
  mkdir -p "$PGDATA" && chown postgres:postgres "$PGDATA" && chmod 700 "$PGDATA"
  pwfile=$(mktemp) && chown postgres "$pwfile"
  printf '%s\n' "${POSTGRES_PASSWORD:-}" > "$pwfile"
  initargs=(-D "$PGDATA" -U "$POSTGRES_USER" --auth-local=trust --auth-host="$AUTH" -E UTF8 --locale=C.UTF-8)
  [ -n "${POSTGRES_PASSWORD:-}" ] && initargs+=(--pwfile="$pwfile")
  as_pg initdb "${initargs[@]}" ${POSTGRES_INITDB_ARGS:-} >/dev/null
  rm -f "$pwfile"
  printf 'host all all all %s\n' "$AUTH" >> "$PGDATA/pg_hba.conf"
  printf "listen_addresses = '*'\n" >> "$PGDATA/postgresql.conf"

  # a private server on the socket only, for the database and init scripts
  as_pg pg_ctl -D "$PGDATA" -o "-c listen_addresses=''" -w start >/dev/null
  psql=(psql -v ON_ERROR_STOP=1 -X -q -U "$POSTGRES_USER" -h /var/run/postgresql)
  if [ "$POSTGRES_DB" != postgres ]; then
    as_pg "${psql[@]}" -d postgres -v db="$POSTGRES_DB" <<<'CREATE DATABASE :"db";'
  fi
  for f in /docker-entrypoint-initdb.d/*; do
    case "$f" in
      *.sh) echo "running $f"; . "$f" ;;
      *.sql) echo "running $f"; as_pg "${psql[@]}" -d "$POSTGRES_DB" -f "$f" ;;
      *.sql.gz) echo "running $f"; gunzip -c "$f" | as_pg "${psql[@]}" -d "$POSTGRES_DB" ;;
    esac
  done
  as_pg pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
  echo "PostgreSQL init process complete; ready for start up."
fi

exec runuser -u postgres -- postgres -D "$PGDATA" "$@"
