//go:build tools

// Package tools pins the end-to-end tests' controllers that are built on Kubernetes' v0.36
// libraries, each built with `go build -o BIN PACKAGE` from this folder (see hack/e2e.mk):
//   - provider-kubernetes v1.3.1, the real one, which carries step three's objects to the claimed
//     clusters (hack/e2e.mk says why v1.3.1 and not v1.4.x);
//   - Flux's source-controller v1.9.3, kustomize-controller v1.9.3 and helm-controller v1.6.2,
//     which run against a claimed cluster: Flux v2.9.2 ships them together (its go.mod requires
//     their api modules at these versions);
//   - kwok v0.8.0, which plays the kubelet of a claimed cluster's nodes.
//
// They are one module so that Go builds each package they share once: apart from the Kubernetes
// version (v0.36.1 to v0.36.4 in their own go.mod files), they require most of the same modules at
// nearby versions. Cold, kustomize-controller alone took 343 s to build from its own wrapper, all
// five 530 s from this one (docs/performance.md, "A cold make test"). Go's minimal version
// selection gives each the highest version any of them requires (for some, a newer Kubernetes,
// grpc or cel-go than their own go.mod asks for); go.mod lists every version.
//
// go.mod repeats the replace directives of the controllers' own go.mod files, which go ignores in
// a dependency (all but those of their ./api): go-digest at helm-controller's commit (source- and
// kustomize-controller pin an older commit of the same branch, all three for BLAKE3), kustomize
// v0.21.1 (helm- and kustomize-controller's) and yaml.v3 v3.0.1 (kustomize-controller's). The
// module proxy serves no version of github.com/nebius/gosdk, which provider-kubernetes imports for
// its Nebius identity: nebius-gosdk-standin declares the four names that code uses and refuses to
// build a Nebius token source.
package tools

import (
	_ "github.com/crossplane-contrib/provider-kubernetes/cmd/provider"
	_ "github.com/fluxcd/helm-controller"
	_ "github.com/fluxcd/kustomize-controller"
	_ "github.com/fluxcd/source-controller"
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
