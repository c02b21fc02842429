package awsres

import (
	xpv1 "github.com/crossplane/crossplane-runtime/v2/apis/common/v1"
	"github.com/crossplane/crossplane-runtime/v2/pkg/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/do-now/function-karpenter/internal/config"
)

func typeMeta(apiVersion, kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: apiVersion, Kind: kind}
}

// externalName names the AWS resource for providers whose resources are
// identified by a user-chosen name (roles, role policies, rules).
func externalName(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Annotations: map[string]string{meta.AnnotationKeyExternalName: name}}
}

func resourceSpec(c *config.Config) xpv1.ResourceSpec {
	return xpv1.ResourceSpec{ProviderConfigReference: &xpv1.Reference{Name: c.AWSProviderConfig()}}
}

// tags are the platform's tags plus the cluster tag, which the platform
// cannot override.
func tags(c *config.Config) map[string]*string {
	t := make(map[string]*string, len(c.Input.Tags)+1)
	for k, v := range c.Input.Tags {
		t[k] = ptr(v)
	}
	t[ClusterTag] = ptr(c.Spec.Cluster.Name)
	return t
}

func ptr[T any](v T) *T { return &v }

// optional is nil for the empty string, so an unset field stays unset.
func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// or returns observed when AWS reported it, else the derived value.
func or(observed, derived string) string {
	if observed != "" {
		return observed
	}
	return derived
}
