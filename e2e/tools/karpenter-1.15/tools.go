//go:build tools

// Package tools pins Karpenter's AWS controller at the 1.15 release the end-to-end suite upgrades
// a claim to (TestRealKarpenter), built with `go build -o BIN
// github.com/aws/karpenter-provider-aws/cmd/controller` from this folder (see hack/e2e.mk).
//
// It is v1.15.0, not the newest patch the function serves (1.15.2): v1.15.2's go.mod requires
// sigs.k8s.io/karpenter v1.15.1, which the module proxy refuses (403), and building it against
// v1.15.0 would run a pairing Karpenter never released. v1.15.0 requires
// github.com/aws/aws-sdk-go-v2/service/timestreamwrite v1.43.1, which the proxy refuses too:
// go.mod replaces it with v1.43.0: the controller only declares an interface of that client
// (pkg/aws/sdk.go, TimestreamWriteAPI) and never calls it. Its go.mod asks for a newer Go than the
// machine's: the build runs with GOTOOLCHAIN set there.
package tools

import _ "github.com/aws/karpenter-provider-aws/cmd/controller"
