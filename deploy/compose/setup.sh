#!/bin/sh
# Initialises, once, two organisations (acme, globex) and two witnesses in the shared volume
# and peers them: each node trusts the other's CA and keys, and both logs are co-signed by both
# witnesses (k = 2). Run by the `setup` service of compose.yaml before anything serves.
set -eu
D=${ACCORD_DIR:-/var/lib/accord}
if [ -f "$D/.initialised" ]; then
  echo "setup: already initialised"
  exit 0
fi

# Witnesses: `init` prints the cosigner vkey; --san is the compose service name.
W1=$(accord-witness init --dir "$D/w1" --name witness-one.example --san w1 \
  --grpc-listen 0.0.0.0:7444 --http-listen 0.0.0.0:7080)
W2=$(accord-witness init --dir "$D/w2" --name witness-two.example --san w2 \
  --grpc-listen 0.0.0.0:7444 --http-listen 0.0.0.0:7080)

# Nodes: their certificates name <org>.accord, the compose network alias of each node.
ACME_OUT=$(accord-node init --dir "$D/acme" --name acme --party alice --listen 0.0.0.0:7443)
GLOBEX_OUT=$(accord-node init --dir "$D/globex" --name globex --party bob --listen 0.0.0.0:7443)
ACME=$(cat "$D/acme/keys/node.vkey")
GLOBEX=$(cat "$D/globex/keys/node.vkey")
ALICE=$(echo "$ACME_OUT" | sed -n 's/^party alice: vkey \([^ ]*\).*/\1/p')
BOB=$(echo "$GLOBEX_OUT" | sed -n 's/^party bob: vkey \([^ ]*\).*/\1/p')

for w in w1 w2; do
  sed -i 's|^# metrics_listen = .*|metrics_listen = "0.0.0.0:9465"|' "$D/$w/witness.toml"
  cat >>"$D/$w/witness.toml" <<TOML

[[logs]]
origin = "acme.accord/log"
vkeys = ["$ACME"]

[[logs]]
origin = "globex.accord/log"
vkeys = ["$GLOBEX"]
TOML
done

# peer_entry NAME NODE_VKEY PARTY_VKEY: the other organisation as a [[peers]] entry.
peer_entry() {
  cat <<TOML

[[peers]]
name = "$1"
endpoint = "https://$1.accord:7443"
vkeys = ["$2", "$3"]
tls_pem = "$D/$1/tls/ca.pem"
TOML
}

for org in acme globex; do
  cfg="$D/$org/accord.toml"
  sed -i 's|^# metrics_listen = .*|metrics_listen = "0.0.0.0:9464"|' "$cfg"
  sed -i 's|^k = 0$|k = 2|' "$cfg"
  cat >>"$cfg" <<TOML

[[witnesses.list]]
vkey = "$W1"
endpoint = "https://w1:7444"
ca = "$D/w1/tls/ca.pem"

[[witnesses.list]]
vkey = "$W2"
endpoint = "https://w2:7444"
ca = "$D/w2/tls/ca.pem"
TOML
done
peer_entry globex "$GLOBEX" "$BOB" >>"$D/acme/accord.toml"
peer_entry acme "$ACME" "$ALICE" >>"$D/globex/accord.toml"

touch "$D/.initialised"
echo "setup: acme, globex, w1 and w2 initialised and peered"
