//go:build tools

// Package tools pins Crossplane core (the controller manager, not the CLI) for the end-to-end
// tests, built with `go build -o BIN github.com/crossplane/crossplane/v2/cmd/crossplane` from this
// folder (see hack/e2e.mk).
package tools

import _ "github.com/crossplane/crossplane/v2/cmd/crossplane"
