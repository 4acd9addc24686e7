#!/bin/sh
# Initialises, once, the node of organisation acme for two instances on one PostgreSQL: one
# `init` (node key, TLS identity naming both instances, tokens), a database password, and the
# `[storage]` section. Run by the `setup` service of compose.yaml before anything starts.
set -eu
D=${ACCORD_DIR:-/var/lib/accord}
if [ -f "$D/.initialised" ]; then
  echo "setup: already initialised"
  exit 0
fi
accord-node init --dir "$D/acme" --name acme --party alice --listen 0.0.0.0:7443 \
  --san acme-a.accord --san acme-b.accord
sed -i 's|^# metrics_listen = .*|metrics_listen = "0.0.0.0:9464"|' "$D/acme/accord.toml"
mkdir -p "$D/acme/secrets"
# A random password, readable by the postgres container (uid 999) and the node (uid 10001).
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$D/acme/secrets/pg-password"
chmod 0644 "$D/acme/secrets/pg-password"
cat >>"$D/acme/accord.toml" <<TOML

[storage]
backend = "postgres"
url = "postgres://accord@postgres:5432/accord"
password_file = "secrets/pg-password"
lease_ms = 3000
TOML
touch "$D/.initialised"
echo "setup: acme initialised for two instances on PostgreSQL"
