//go:build tools

// Package tools pins Flux's source-controller, which runs against a claimed cluster in the end-to-end
// tests, built with `go build -o BIN github.com/fluxcd/source-controller` from this folder (see hack/e2e.mk).
// Flux v2.9.2 ships source-controller v1.9.3, kustomize-controller v1.9.3 and helm-controller
// v1.6.2 together (its go.mod requires their api modules at those versions). go.mod repeats the
// replace directives of source-controller's own go.mod (but its ./api), which go ignores in a dependency.
package tools

import (
	_ "github.com/fluxcd/source-controller"
)
