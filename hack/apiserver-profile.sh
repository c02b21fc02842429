#!/usr/bin/env bash
# hack/apiserver-profile.sh: takes a CPU profile of an end-to-end run's kube-apiserver, for
# `go tool pprof`. The run must serve /debug/pprof (E2E_PROFILING=1) and keep its folder
# (E2E_KEEP=1, or while it runs); its admin kubeconfig is <run folder>/pki/admin.kubeconfig (the
# hub's) or <run folder>/claimed-<cluster>/pki/admin.kubeconfig.
#
#   hack/apiserver-profile.sh KUBECONFIG SECONDS OUT
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 KUBECONFIG SECONDS OUT" >&2; exit 2; }
kubeconfig=$1 seconds=$2 out=$3
field() { awk -v k="$1:" '$1 == k { print $2; exit }' "$kubeconfig"; }
creds=$(mktemp -d)
trap 'rm -rf "$creds"' EXIT
field client-certificate-data | base64 -d > "$creds/crt"
field client-key-data | base64 -d > "$creds/key"
field certificate-authority-data | base64 -d > "$creds/ca"
curl -sSf --cacert "$creds/ca" --cert "$creds/crt" --key "$creds/key" -o "$out" \
	"$(field server)/debug/pprof/profile?seconds=$seconds"
