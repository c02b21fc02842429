// Package e2e proves function-karpenter against a real control plane on loopback: etcd,
// kube-apiserver, kube-controller-manager and Crossplane core, built from the Go module proxy
// (hack/e2e.mk), with the project's two APIs (the claim's XRD and the namespaced XR's, and
// their Compositions), the provider-aws and provider-kubernetes CRDs of both scopes (no Flux: the
// Kustomizations go to the claimed cluster inside Objects), and the function served over mTLS.
// The tests play provider-aws; those that start claimed clusters (realClaimedClusters:
// TestRealProviderKubernetes, TestTwoClusters, TestDeletion, TestAccessCheckFails,
// TestUnreadyDeletesNothing, TestOutOfBandStatementNotKept, TestProviderErrorOnRole,
// TestOneKarpenterPerCluster, TestWalkToReady) run the real provider-kubernetes against them, each cluster with
// its real Flux and kwok's nodes; the others play provider-kubernetes and the claimed clusters
// too. They carry the build tag e2e and run with `make e2e-test`.
package e2e
