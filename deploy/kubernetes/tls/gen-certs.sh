#!/bin/sh
# gen-certs.sh — a private CA and the collector's certificate for the tls/
# overlay (README.md in the parent directory, "TLS"), with openssl:
#
#   sh deploy/kubernetes/tls/gen-certs.sh [DIR]
#
# writes into DIR (default: this script's directory, where kustomization.yaml
# reads them):
#   ca.crt    the CA's certificate -> ConfigMap profd-ca (the scraper's
#             --collector-cacert; also for curl --cacert, profd --cacert,
#             go tool pprof -tls_ca)
#   ca.key    the CA's key: kept to renew tls.crt; store it somewhere safe
#             (it is in no manifest)
#   tls.crt   the collector's certificate, signed by the CA  } Secret profd-tls
#   tls.key   its key (ECDSA P-256, unencrypted)             } (kubernetes.io/tls)
#
# Run again to renew tls.crt and tls.key: an existing ca.crt + ca.key pair is
# reused (the scraper's CA does not change), else a new CA is made.
#
# Environment:
#   PROFD_TLS_NAMES  the certificate's DNS names (default: the Service's
#                    profd.profd.svc profd.profd.svc.cluster.local profd.profd
#                    profd, and localhost for kubectl port-forward; IP
#                    127.0.0.1 is always added). Another namespace or cluster
#                    domain: set it.
#   PROFD_TLS_DAYS   validity of tls.crt in days (default 365; the CA: 3650)
set -eu
dir=${1:-$(dirname "$0")}
names=${PROFD_TLS_NAMES:-profd.profd.svc profd.profd.svc.cluster.local profd.profd profd localhost}
days=${PROFD_TLS_DAYS:-365}
command -v openssl >/dev/null || {
	echo "gen-certs.sh: openssl not found" >&2
	exit 1
}
umask 077
mkdir -p "$dir"
cd "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

san=''
for n in $names; do san="${san}DNS:$n,"; done
san="${san}IP:127.0.0.1"
cn=${names%% *}

cat >"$tmp/openssl.cnf" <<EOF
[req]
distinguished_name = dn
[dn]
[ca]
basicConstraints = critical, CA:TRUE, pathlen:0
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[server]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = $san
authorityKeyIdentifier = keyid
EOF

if [ -s ca.crt ] && [ -s ca.key ]; then
	echo "gen-certs.sh: reusing the CA in $dir/ca.crt"
else
	openssl ecparam -name prime256v1 -genkey -noout -out ca.key
	openssl req -new -x509 -config "$tmp/openssl.cnf" -extensions ca -key ca.key \
		-subj "/CN=profd CA" -days 3650 -sha256 -out ca.crt
	echo "gen-certs.sh: new CA $dir/ca.crt (its key: $dir/ca.key)"
fi
openssl ecparam -name prime256v1 -genkey -noout -out "$tmp/tls.key"
openssl req -new -config "$tmp/openssl.cnf" -key "$tmp/tls.key" -subj "/CN=$cn" -out "$tmp/tls.csr"
openssl x509 -req -in "$tmp/tls.csr" -CA ca.crt -CAkey ca.key -set_serial "0x$(openssl rand -hex 16)" \
	-days "$days" -sha256 -extfile "$tmp/openssl.cnf" -extensions server -out "$tmp/tls.crt" 2>/dev/null
openssl verify -CAfile ca.crt "$tmp/tls.crt" >/dev/null
mv "$tmp/tls.key" tls.key
mv "$tmp/tls.crt" tls.crt
chmod 644 ca.crt tls.crt
echo "gen-certs.sh: $dir/tls.crt for $san, $days days"
