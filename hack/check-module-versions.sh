#!/usr/bin/env bash
# hack/check-module-versions.sh: the function's module, the end-to-end suite's, the Flux
# tests', the package tests' and the package tool's, and the wrappers that build the Crossplane
# CLI, Crossplane core and controller-gen (tools/crossplane, e2e/tools/crossplane,
# tools/controller-gen) build many of the same modules (Kubernetes' libraries, controller-runtime,
# golang.org/x, grpc, the providers' types). Go's build cache reuses a compiled
# package only when every package below it is the same source (go1.26.8
# src/cmd/go/internal/work/exec.go, buildActionID hashes each import's build ID), so one module
# at two versions compiles everything above it twice, in a cold make test several minutes. This
# fails when a module built by two of them is at two versions, and says which: raise the lower
# module's requirement (go get MODULE@VERSION, then go mod tidy there and in e2e/). Not checked:
# the wrappers of the claimed clusters' controllers and of promtool, which need Kubernetes'
# v0.36 and v0.37 libraries (their go.mod), and those of Kubernetes and etcd, which build the
# versions of grpc, golang.org/x and the rest their releases pin: raising those would run the
# control plane on libraries its release was not built with.
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
#   the version Kubernetes built it with. The CLI's `beta validate` runs that validator too, at
#   the v0.26.1 its wrapper selects.
# - crossplane/v2 and crossplane-runtime/v2: the CLI is v2.2.1, the last version whose module
#   holds it (cmd/crank), with the crossplane-runtime the function's SDK needs (v2.2.1); core is
#   v2.4.2, the newest served, with crossplane-runtime v2.4.0 (its wrapper's replace says why).
allowed='^(github.com/google/cel-go|github.com/crossplane/crossplane/v2|github.com/crossplane/crossplane-runtime/v2)$'

{
	deps . ./...
	deps e2e -tags e2e ./...
	deps test/flux ./...
	deps test/package ./...
	deps tools/xpkg ./...
	deps tools/crossplane github.com/crossplane/crossplane/v2/cmd/crank
	deps e2e/tools/crossplane github.com/crossplane/crossplane/v2/cmd/crossplane
	deps tools/controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen
} | sort -u | awk -v allowed="$allowed" '
	{ versions[$1] = versions[$1] " " $2; n[$1]++ }
	END {
		bad = 0
		for (m in n) if (n[m] > 1 && m !~ allowed) { print "two versions of " m ":" versions[m] > "/dev/stderr"; bad = 1 }
		exit bad
	}'
