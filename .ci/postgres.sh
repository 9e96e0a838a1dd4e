#!/usr/bin/env bash
# Start a throw-away PostgreSQL server for the knowledge-store tests and export
# SETUPBOT_TEST_PG_URL. Source it (`. .ci/postgres.sh`) so the variable reaches the tests;
# `setupbot_pg_stop` (also run on exit) stops the server and removes its directory.
# Uses Debian's packages: postgresql (+ postgresql-<major>-pgvector when the suite has it).

setupbot_pg_start() {
    local bindir major datadir port
    if ! ls -d /usr/lib/postgresql/*/bin >/dev/null 2>&1; then
        echo "postgres.sh: installing Debian's postgresql packages" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >/dev/null || true
        apt-get install -y -qq postgresql >/dev/null || { echo "postgres.sh: cannot install postgresql" >&2; return 1; }
    fi
    bindir=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
    major=$(basename "$(dirname "$bindir")")
    # pgvector is optional: the store falls back to in-process cosine without it.
    if [ ! -e "/usr/share/postgresql/$major/extension/vector.control" ] \
        && apt-cache show "postgresql-$major-pgvector" >/dev/null 2>&1; then
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "postgresql-$major-pgvector" >/dev/null \
            || echo "postgres.sh: pgvector not installed; continuing without it" >&2
    fi
    id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
    datadir=$(mktemp -d /tmp/setupbot-pg.XXXXXX)
    chown postgres "$datadir"
    chmod 700 "$datadir"
    runuser -u postgres -- "$bindir/initdb" -D "$datadir/data" -A trust -U postgres -E UTF8 >"$datadir/initdb.log" 2>&1 \
        || { cat "$datadir/initdb.log" >&2; return 1; }
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    runuser -u postgres -- "$bindir/pg_ctl" -D "$datadir/data" -l "$datadir/server.log" -w -t 60 \
        -o "-p $port -k $datadir -c listen_addresses=127.0.0.1 -c max_connections=100 -c fsync=off" start >/dev/null \
        || { cat "$datadir/server.log" >&2; return 1; }
    runuser -u postgres -- "$bindir/createdb" -h 127.0.0.1 -p "$port" -U postgres setupbot_test || return 1
    if runuser -u postgres -- "$bindir/psql" -h 127.0.0.1 -p "$port" -U postgres -d setupbot_test \
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
    if [ -n "${SETUPBOT_PG_DATADIR:-}" ] && [ -d "$SETUPBOT_PG_DATADIR/data" ]; then
        runuser -u postgres -- "$SETUPBOT_PG_BINDIR/pg_ctl" -D "$SETUPBOT_PG_DATADIR/data" -m fast -w stop >/dev/null 2>&1 || true
        rm -rf "$SETUPBOT_PG_DATADIR"
    fi
    SETUPBOT_PG_DATADIR=
}

if setupbot_pg_start; then
    # Stop the server when the shell that sourced this exits, keeping any EXIT trap it had.
    _setupbot_prev_exit_trap=$(trap -p EXIT | sed -e "s/^trap -- '//" -e "s/' EXIT\$//")
    trap "setupbot_pg_stop; ${_setupbot_prev_exit_trap:-:}" EXIT
else
    echo "postgres.sh: could not start PostgreSQL; PostgreSQL store tests will be skipped" >&2
fi
