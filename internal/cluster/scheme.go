package cluster

import (
	"github.com/crossplane/function-sdk-go/resource/composed"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
)

// init registers the types this package builds with the scheme composed.From
// converts through.
func init() { //nolint:gochecknoinits // composed.Scheme is a package global of the SDK.
	utilruntime.Must(corev1.AddToScheme(composed.Scheme))
	utilruntime.Must(batchv1.AddToScheme(composed.Scheme))
	utilruntime.Must(appsv1.AddToScheme(composed.Scheme))
	utilruntime.Must(rbacv1.AddToScheme(composed.Scheme))
}
