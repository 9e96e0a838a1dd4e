#!/bin/bash
# The official rabbitmq image's contract: a default user from RABBITMQ_DEFAULT_USER/PASS/VHOST
# that may connect from other hosts (the network is private), AMQP on 5672, management on 15672.
set -euo pipefail
if [ "${1:-rabbitmq-server}" != rabbitmq-server ]; then exec "$@"; fi
conf=/etc/rabbitmq/rabbitmq.conf
{
  echo "loopback_users = none"
  echo "listeners.tcp.default = 5672"
  echo "management.tcp.port = 15672"
  printf 'default_user = %s\n' "${RABBITMQ_DEFAULT_USER:-guest}"
  printf 'default_pass = %s\n' "${RABBITMQ_DEFAULT_PASS:-guest}"
  printf 'default_vhost = %s\n' "${RABBITMQ_DEFAULT_VHOST:-/}"
} > "$conf"
chown rabbitmq:rabbitmq "$conf"
mkdir -p /var/lib/rabbitmq /var/log/rabbitmq && chown -R rabbitmq:rabbitmq /var/lib/rabbitmq /var/log/rabbitmq
# the Erlang cookie lives in the server user's home; runuser keeps root's HOME otherwise
export HOME=/var/lib/rabbitmq RABBITMQ_LOGS=- RABBITMQ_SASL_LOGS=-
exec runuser -u rabbitmq -- rabbitmq-server
