//go:build tools

// Package tools pins Karpenter's AWS controller at the 1.14 release the end-to-end suite runs
// for real (TestRealKarpenter), built with `go build -o BIN
// github.com/aws/karpenter-provider-aws/cmd/controller` from this folder (see hack/e2e.mk). Its
// go.mod asks for a newer Go than the machine's: the build runs with GOTOOLCHAIN set there.
package tools

import _ "github.com/aws/karpenter-provider-aws/cmd/controller"
