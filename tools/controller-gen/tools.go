//go:build tools

// Package tools pins the version of controller-gen, built with
// `go build -o BIN sigs.k8s.io/controller-tools/cmd/controller-gen` from this folder (see hack/tools.mk).
package tools

import _ "sigs.k8s.io/controller-tools/cmd/controller-gen"
