#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Makes the ft-etcd-tls Secret of k8s/overlays/prod (etcd's CA, its member certificate, the proxies' client certificate) and prints it as YAML.
#
# usage: scripts/k8s-etcd-tls.sh [NAMESPACE [MEMBERS [DAYS]]] > ft-etcd-tls.yaml && kubectl apply -f ft-etcd-tls.yaml
#   NAMESPACE  the overlay's namespace (default fasttier)
#   MEMBERS    etcd members the certificate names, ft-etcd-0..MEMBERS-1 (default 3: enough to grow to three)
#   DAYS       validity (default 825)
# The CA key is not kept: a new member or a renewal means running this again and applying the result (then
# restarting etcd and the proxies). Keep the printed Secret out of the repository.
set -eu

NS=${1:-fasttier}
MEMBERS=${2:-3}
DAYS=${3:-825}
case "$MEMBERS" in '' | *[!0-9]*) echo "MEMBERS must be a number" >&2; exit 2 ;; esac
case "$DAYS" in '' | *[!0-9]*) echo "DAYS must be a number" >&2; exit 2 ;; esac

d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
umask 077

# Every name a client or a peer dials etcd by: the Service (short, namespaced, cluster domain) and each member.
sans="DNS:ft-etcd,DNS:ft-etcd.$NS,DNS:ft-etcd.$NS.svc,DNS:ft-etcd.$NS.svc.cluster.local,DNS:localhost,IP:127.0.0.1"
i=0
while [ "$i" -lt "$MEMBERS" ]; do
	m="ft-etcd-$i"
	sans="$sans,DNS:$m.ft-etcd,DNS:$m.ft-etcd.$NS,DNS:$m.ft-etcd.$NS.svc,DNS:$m.ft-etcd.$NS.svc.cluster.local"
	i=$((i + 1))
done

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

# The CA, its key only in the temporary directory.
key "$d/ca.key"
openssl req -x509 -new -key "$d/ca.key" -out "$d/ca.crt" -days "$DAYS" -subj "/CN=FastTier etcd CA" \
	-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null

# sign NAME CN EXTENSIONS: NAME.key and NAME.crt signed by the CA.
sign() {
	key "$d/$1.key"
	openssl req -new -key "$d/$1.key" -out "$d/$1.csr" -subj "/CN=$2" 2>/dev/null
	printf '%s\n' "$3" >"$d/$1.ext"
	openssl x509 -req -in "$d/$1.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -out "$d/$1.crt" \
		-days "$DAYS" -extfile "$d/$1.ext" 2>/dev/null
}

# The members: serving clients and peers, and dialing peers (one certificate for both).
sign etcd ft-etcd "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth,clientAuth
subjectAltName=$sans"
# The proxies: clients only.
sign client ft-proxy "basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature
extendedKeyUsage=clientAuth"

b64() { base64 -w0 <"$1"; }
cat <<EOF
# ft-etcd-tls: made by scripts/k8s-etcd-tls.sh for namespace $NS, members ft-etcd-0..$((MEMBERS - 1)), $DAYS days.
---
apiVersion: v1
kind: Secret
metadata:
  name: ft-etcd-tls
  namespace: $NS
  labels:
    app.kubernetes.io/part-of: fasttier
type: Opaque
data:
  ca.crt: $(b64 "$d/ca.crt")
  etcd.crt: $(b64 "$d/etcd.crt")
  etcd.key: $(b64 "$d/etcd.key")
  client.crt: $(b64 "$d/client.crt")
  client.key: $(b64 "$d/client.key")
EOF
