#!/usr/bin/env bash
# hack/check-module-versions.sh: the function's module, the end-to-end suite's, the Flux
# tests', the package tests' and the package tool's build many of the same modules (Kubernetes'
# libraries, golang.org/x, grpc, the providers' types). Go's build cache reuses a compiled
# package only when every package below it is the same source (go1.26.8
# src/cmd/go/internal/work/exec.go, buildActionID hashes each import's build ID), so one module
# at two versions compiles everything above it twice, in a cold make test several minutes. This
# fails when a module built by two of them is at two versions, and says which: raise the lower
# module's requirement (go get MODULE@VERSION, then go mod tidy there and in e2e/).
set -euo pipefail
cd "$(dirname "$0")/.."

# deps DIR ARGS...: "module version" of every package the tests of DIR's packages build.
deps() {
	local dir=$1
	shift
	(cd "$dir" && go list -deps -test -f '{{with .Module}}{{if not .Main}}{{.Path}} {{.Version}}{{end}}{{end}}' "$@") | sort -u
}

# Modules allowed at two versions, each for its reason:
# - cel-go: test/flux validates CRDs' CEL rules with Kubernetes v0.35's validator, whose
#   k8s.io/apiserver v0.35.0 requires cel-go v0.26.0 (its go.mod), at the v0.27.0 test/flux's
#   go.mod sets; e2e evaluates provider-kubernetes' readiness queries at the v0.30.0
#   provider-kubernetes v1.3.1's go.mod requires. Raising test/flux would move the validator off
#   the version Kubernetes built it with.
allowed='^github.com/google/cel-go$'

{
	deps . ./...
	deps e2e -tags e2e ./...
	deps test/flux ./...
	deps test/package ./...
	deps tools/xpkg ./...
} | sort -u | awk -v allowed="$allowed" '
	{ versions[$1] = versions[$1] " " $2; n[$1]++ }
	END {
		bad = 0
		for (m in n) if (n[m] > 1 && m !~ allowed) { print "two versions of " m ":" versions[m] > "/dev/stderr"; bad = 1 }
		exit bad
	}'
