// Package status writes what AWS reported back onto the XR's status, where
// Crossplane copies it to the claim: the role ARN, the queue and the rules.
package status

import (
	"github.com/crossplane/function-sdk-go/resource/composite"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/do-now/function-karpenter/apis/v1alpha1"
	"github.com/do-now/function-karpenter/internal/awsres"
	"github.com/do-now/function-karpenter/internal/config"
)

// Write sets the XR status from what AWS reported. Fields stay unset until
// AWS has reported them, so a tenant never reads a guessed ARN.
func Write(xr *composite.Unstructured, c *config.Config, o awsres.Observed, pools map[string]v1alpha1.PoolStatus) error {
	s := v1alpha1.XKarpenterStatus{RoleARN: o.RoleARN}
	if len(pools) > 0 {
		s.Pools = pools
	}
	if o.QueueURL != "" || o.QueueARN != "" {
		s.Queue = &v1alpha1.QueueStatus{Name: c.Names.Queue, URL: o.QueueURL, ARN: o.QueueARN}
	}
	if len(o.RuleARNs) > 0 {
		s.RuleARNs = o.RuleARNs
	}
	fields, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&s)
	if err != nil {
		return err
	}
	for k, v := range fields {
		if err := xr.SetValue("status."+k, v); err != nil {
			return err
		}
	}
	return nil
}
