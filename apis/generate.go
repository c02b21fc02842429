// Package apis holds the types the platform API is generated from: the
// XKarpenter XRD with its claim (apis/definition.yaml), the namespaced
// Karpenter XRD (apis/definition-namespaced.yaml) and its Composition, derived
// from apis/composition.yaml, and the function input CRD
// (package/input/). Regenerate with `make generate`, which runs go generate
// here with CONTROLLER_GEN set to the project's pinned controller-gen.
package apis

//go:generate sh -c "rm -rf ../.cache/generated && $CONTROLLER_GEN object paths=./... crd:crdVersions=v1 output:crd:artifacts:config=../.cache/generated"
//go:generate go run ../hack/xrdgen -crd ../.cache/generated/platform.socle.do-now.io_xkarpenters.yaml -out definition.yaml -claim-kind Karpenter -claim-plural karpenters -default-composition karpenter.platform.socle.do-now.io
//go:generate go run ../hack/xrdgen -crd ../.cache/generated/platform.socle.do-now.io_xkarpenters.yaml -out definition-namespaced.yaml -scope Namespaced -group platform.m.socle.do-now.io -kind Karpenter -plural karpenters -default-composition karpenter.platform.m.socle.do-now.io
//go:generate go run ../hack/compositiongen -in composition.yaml -out composition-namespaced.yaml -name karpenter.platform.m.socle.do-now.io -composite-api-version platform.m.socle.do-now.io/v1alpha1 -composite-kind Karpenter
//go:generate cp ../.cache/generated/karpenter.fn.socle.do-now.io_inputs.yaml ../package/input/karpenter.fn.socle.do-now.io_inputs.yaml
//go:generate go run ../hack/monitoringgen -out ../examples/gitops/monitoring
//go:generate go run ../hack/refgen -xrd definition.yaml -input ../package/input/karpenter.fn.socle.do-now.io_inputs.yaml -render ../examples/render/8-all-ready.yaml -out ../docs/reference.md
