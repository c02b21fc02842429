//go:build tools

// Package tools pins the version of crane, built with
// `go build -o BIN github.com/google/go-containerregistry/cmd/crane` from this folder (see hack/tools.mk).
package tools

import _ "github.com/google/go-containerregistry/cmd/crane"
