#!/bin/bash
# The official mariadb/mysql images' contract on Debian's MariaDB: initialise the data directory
# on first start from the MARIADB_*/MYSQL_* variables, then serve on all interfaces.
set -euo pipefail

case "${1:-mariadbd}" in
  mariadbd|mysqld) shift || true ;;
  -*) ;;
  *) exec "$@" ;;
esac

pick() { for v in "$@"; do if [ -n "${!v:-}" ]; then printf '%s' "${!v}"; return; fi; done; }
ROOT_PW=$(pick MARIADB_ROOT_PASSWORD MYSQL_ROOT_PASSWORD)
ALLOW_EMPTY=$(pick MARIADB_ALLOW_EMPTY_ROOT_PASSWORD MYSQL_ALLOW_EMPTY_PASSWORD)
RANDOM_PW=$(pick MARIADB_RANDOM_ROOT_PASSWORD MYSQL_RANDOM_ROOT_PASSWORD)
DATABASE=$(pick MARIADB_DATABASE MYSQL_DATABASE)
USER_NAME=$(pick MARIADB_USER MYSQL_USER)
USER_PW=$(pick MARIADB_PASSWORD MYSQL_PASSWORD)
ROOT_HOST=$(pick MARIADB_ROOT_HOST MYSQL_ROOT_HOST); ROOT_HOST=${ROOT_HOST:-%}

# SQL string and identifier literals from variable values
str() { local s=${1//\\/\\\\}; s=${s//\'/\\\'}; printf "'%s'" "$s"; }
ident() { printf '`%s`' "${1//\`/\`\`}"; }

if [ ! -d /var/lib/mysql/mysql ]; then
  if [ -z "$ROOT_PW" ] && [ -z "$ALLOW_EMPTY" ] && [ -z "$RANDOM_PW" ]; then
    echo "error: database is uninitialized and password option is not specified" >&2
    echo "  You need to specify one of MARIADB_ROOT_PASSWORD, MARIADB_ALLOW_EMPTY_ROOT_PASSWORD and MARIADB_RANDOM_ROOT_PASSWORD" >&2
    exit 1
  fi
  if [ -n "$RANDOM_PW" ] && [ -z "$ROOT_PW" ]; then
    ROOT_PW=$(tr -dc 'A-Za-z0-9' </dev/urandom | head -c 32); echo "GENERATED ROOT PASSWORD: $ROOT_PW"
  fi
  chown -R mysql:mysql /var/lib/mysql /run/mysqld
  mariadb-install-db --user=mysql --datadir=/var/lib/mysql --auth-root-authentication-method=normal \
    --skip-test-db --skip-name-resolve >/dev/null
  runuser -u mysql -- mariadbd --skip-networking --socket=/run/mysqld/mysqld.sock --datadir=/var/lib/mysql &
  pid=$!
  for _ in $(seq 60); do mariadb-admin --socket=/run/mysqld/mysqld.sock ping >/dev/null 2>&1 && break; sleep 1; done
  sql="SET @@SESSION.SQL_LOG_BIN=0; DELETE FROM mysql.global_priv WHERE User='' OR (User='root' AND Host NOT IN ('localhost'));"
  sql+="CREATE USER 'root'@$(str "$ROOT_HOST") IDENTIFIED BY $(str "$ROOT_PW");"
  sql+="GRANT ALL ON *.* TO 'root'@$(str "$ROOT_HOST") WITH GRANT OPTION;"
  sql+="ALTER USER 'root'@'localhost' IDENTIFIED BY $(str "$ROOT_PW");"
  [ -n "$DATABASE" ] && sql+="CREATE DATABASE IF NOT EXISTS $(ident "$DATABASE");"
  if [ -n "$USER_NAME" ] && [ "$USER_NAME" != root ]; then
    sql+="CREATE USER $(str "$USER_NAME")@'%' IDENTIFIED BY $(str "$USER_PW");"
    [ -n "$DATABASE" ] && sql+="GRANT ALL ON $(ident "$DATABASE").* TO $(str "$USER_NAME")@'%';"
  fi
  sql+="FLUSH PRIVILEGES;"
  mariadb --protocol=socket --socket=/run/mysqld/mysqld.sock -uroot <<<"$sql"
  for f in /docker-entrypoint-initdb.d/*; do
    case "$f" in
      *.sh) echo "running $f"; . "$f" ;;
      *.sql) echo "running $f"; mariadb --socket=/run/mysqld/mysqld.sock -uroot -p"$ROOT_PW" ${DATABASE:+"$DATABASE"} <"$f" ;;
    esac
  done
  # `shutdown` returns once the server has stopped and released its files; a signal to the
  # runuser wrapper would return before mariadbd lets go of ibdata1
  mariadb-admin --protocol=socket --socket=/run/mysqld/mysqld.sock -uroot --password="$ROOT_PW" shutdown
  wait "$pid" || true
  echo "MariaDB init process done. Ready for start up."
fi

exec runuser -u mysql -- mariadbd --bind-address=0.0.0.0 --port=3306 --skip-name-resolve \
  --datadir=/var/lib/mysql --socket=/run/mysqld/mysqld.sock "$@"
