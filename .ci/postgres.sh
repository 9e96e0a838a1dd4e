#!/usr/bin/env bash
# Start a throw-away PostgreSQL server for the knowledge-store tests and export
# SETUPBOT_TEST_PG_URL. Source it (`. .ci/postgres.sh`) so the variable reaches the tests;
# `setupbot_pg_stop` (also run on exit) stops the server and removes its directory.
# Uses Debian's packages: postgresql (+ postgresql-<major>-pgvector when the suite has it).
# Root or passwordless sudo: the server runs as the postgres user. Under CI=true a server that
# does not start fails the run (the store's tests must not be skipped there).
# CIRUN_PG_DRY_RUN=1 prints the privileged commands instead of running them.

# The privileged prefix: nothing as root, sudo otherwise (.ci/run exports its choice).
_pg_root() {
    if [ -n "${CIRUN_PG_DRY_RUN:-}" ]; then echo "as_root: ${_pg_sudo[*]:-}${_pg_sudo[*]:+ }$*" >&2; return 0; fi
    "${_pg_sudo[@]}" "$@"
}
_pg_as_postgres() {
    if [ -n "${CIRUN_PG_DRY_RUN:-}" ]; then echo "as_postgres: $*" >&2; return 0; fi
    if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else sudo -n -u postgres -- "$@"; fi
}
if [ "$(id -u)" -eq 0 ]; then _pg_sudo=(); else _pg_sudo=(sudo -n); fi

setupbot_pg_start() {
    local bindir major datadir port
    if ! ls -d /usr/lib/postgresql/*/bin >/dev/null 2>&1; then
        echo "postgres.sh: installing Debian's postgresql packages" >&2
        export DEBIAN_FRONTEND=noninteractive
        _pg_root apt-get update -qq >/dev/null || true
        _pg_root apt-get install -y -qq postgresql >/dev/null || { echo "postgres.sh: cannot install postgresql" >&2; return 1; }
    fi
    bindir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    if [ -n "${CIRUN_PG_DRY_RUN:-}" ] && [ -z "$bindir" ]; then bindir=/usr/lib/postgresql/NN/bin; fi
    major=$(basename "$(dirname "$bindir")")
    # pgvector is optional: the store falls back to in-process cosine without it.
    if [ ! -e "/usr/share/postgresql/$major/extension/vector.control" ] \
        && apt-cache show "postgresql-$major-pgvector" >/dev/null 2>&1; then
        _pg_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "postgresql-$major-pgvector" >/dev/null \
            || echo "postgres.sh: pgvector not installed; continuing without it" >&2
    fi
    id postgres >/dev/null 2>&1 || _pg_root useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
    datadir=$(mktemp -d /tmp/setupbot-pg.XXXXXX)
    # postgres owns the directory; this shell (maybe not root) keeps reading the logs in it.
    chmod 755 "$datadir"
    _pg_root chown postgres "$datadir"
    _pg_as_postgres "$bindir/initdb" -D "$datadir/data" -A trust -U postgres -E UTF8 >"$datadir.initdb.log" 2>&1 \
        || { cat "$datadir.initdb.log" >&2; return 1; }
    rm -f "$datadir.initdb.log"
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    _pg_as_postgres "$bindir/pg_ctl" -D "$datadir/data" -l "$datadir/server.log" -w -t 60 \
        -o "-p $port -k $datadir -c listen_addresses=127.0.0.1 -c max_connections=100 -c fsync=off" start >/dev/null \
        || { cat "$datadir/server.log" >&2; return 1; }
    _pg_as_postgres "$bindir/createdb" -h 127.0.0.1 -p "$port" -U postgres setupbot_test || return 1
    if _pg_as_postgres "$bindir/psql" -h 127.0.0.1 -p "$port" -U postgres -d setupbot_test \
        -qAt -c "CREATE EXTENSION IF NOT EXISTS vector" >/dev/null 2>&1; then
        echo "postgres.sh: pgvector enabled" >&2
    else
        echo "postgres.sh: pgvector not available on this server (in-process cosine is used)" >&2
    fi
    SETUPBOT_PG_DATADIR=$datadir
    SETUPBOT_PG_BINDIR=$bindir
    export SETUPBOT_TEST_PG_URL="postgresql://postgres@127.0.0.1:$port/setupbot_test"
    echo "export SETUPBOT_TEST_PG_URL=$SETUPBOT_TEST_PG_URL"
}

setupbot_pg_stop() {
    if [ -n "${SETUPBOT_PG_DATADIR:-}" ]; then
        if [ -d "$SETUPBOT_PG_DATADIR/data" ]; then
            _pg_as_postgres "$SETUPBOT_PG_BINDIR/pg_ctl" -D "$SETUPBOT_PG_DATADIR/data" -m fast -w stop >/dev/null 2>&1 || true
        fi
        _pg_root rm -rf "$SETUPBOT_PG_DATADIR"
        if [ -n "${CIRUN_PG_DRY_RUN:-}" ]; then rm -rf "$SETUPBOT_PG_DATADIR"; fi
    fi
    SETUPBOT_PG_DATADIR=
}

if setupbot_pg_start; then
    # Stop the server when the shell that sourced this exits, keeping any EXIT trap it had.
    _setupbot_prev_exit_trap=$(trap -p EXIT | sed -e "s/^trap -- '//" -e "s/' EXIT\$//")
    trap "setupbot_pg_stop; ${_setupbot_prev_exit_trap:-:}" EXIT
elif [ "${CI:-}" = "true" ]; then
    echo "postgres.sh: could not start PostgreSQL, and CI runs the PostgreSQL store tests: failing" >&2
    return 1 2>/dev/null || exit 1
else
    echo "postgres.sh: could not start PostgreSQL; PostgreSQL store tests will be skipped" >&2
fi
