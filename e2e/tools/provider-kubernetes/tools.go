//go:build tools

// Package tools pins provider-kubernetes, the real one, for the end-to-end tests' claimed
// clusters, built with `go build -o BIN github.com/crossplane-contrib/provider-kubernetes/cmd/provider`
// from this folder (see hack/e2e.mk, which says why v1.3.1 and not v1.4.x). It builds with the
// machine's Go; its one import the module proxy does not serve is replaced in go.mod.
package tools

import _ "github.com/crossplane-contrib/provider-kubernetes/cmd/provider"
