//go:build tools

// Package tools pins provider-kubernetes, the real one, for the end-to-end tests' claimed
// clusters, built with `go build -o BIN github.com/crossplane-contrib/provider-kubernetes/cmd/provider`
// from this folder (see hack/e2e.mk). v1.4.1's go.mod asks for Go 1.27.1: the recipe builds it
// with GOTOOLCHAIN=go1.27.3, fetched from the module proxy.
package tools

import _ "github.com/crossplane-contrib/provider-kubernetes/cmd/provider"
