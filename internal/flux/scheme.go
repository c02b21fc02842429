package flux

import (
	"github.com/crossplane/function-sdk-go/resource/composed"
	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
)

// init registers the types this package builds with the scheme composed.From
// converts through.
func init() { //nolint:gochecknoinits // composed.Scheme is a package global of the SDK.
	utilruntime.Must(kustomizev1.AddToScheme(composed.Scheme))
}
