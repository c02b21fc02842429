//go:build tools

// Package tools pins the version of crank, built with
// `go build -o BIN github.com/crossplane/crossplane/v2/cmd/crank` from this folder (see hack/tools.mk).
package tools

import _ "github.com/crossplane/crossplane/v2/cmd/crank"
