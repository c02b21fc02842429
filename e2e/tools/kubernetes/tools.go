//go:build tools

// Package tools pins kube-apiserver, kube-controller-manager and kube-scheduler for the end-to-end tests, built with
// `go build -o BIN k8s.io/kubernetes/cmd/<name>` from this folder (see hack/e2e.mk).
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
