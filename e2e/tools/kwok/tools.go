//go:build tools

// Package tools pins kwok, which plays the kubelet of a claimed cluster's nodes in the end-to-end
// tests, built with `go build -o BIN sigs.k8s.io/kwok/cmd/kwok` from this folder (see hack/e2e.mk).
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
