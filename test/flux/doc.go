// Package flux proves that what Flux would apply for a claim is really built
// and valid: the composed Kustomizations' patches and substitutions go through
// the kustomize library kustomize-controller itself uses, the resulting
// NodePools and EC2NodeClasses are validated against Karpenter's own CRDs the
// way the API server would (schema, defaults, CEL rules), and the HelmRelease
// values are rendered through the Karpenter chart with Helm's Go SDK.
//
// It is a module of its own, so its dependencies (kustomize, Helm, the API
// server's validation) never reach the function's go.mod. Run it with
// make flux-test.
package flux
