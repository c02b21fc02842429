package awsres

import (
	"github.com/crossplane/function-sdk-go/resource/composed"
	events "github.com/upbound/provider-aws/v2/apis/cluster/cloudwatchevents/v1beta1"
	eks "github.com/upbound/provider-aws/v2/apis/cluster/eks/v1beta1"
	iam "github.com/upbound/provider-aws/v2/apis/cluster/iam/v1beta1"
	sqs "github.com/upbound/provider-aws/v2/apis/cluster/sqs/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
)

// init registers the provider types this package builds with the scheme
// composed.From converts through, so no caller can forget to.
func init() { //nolint:gochecknoinits // composed.Scheme is a package global of the SDK.
	for _, add := range []func(*runtime.Scheme) error{iam.AddToScheme, sqs.AddToScheme, events.AddToScheme, eks.AddToScheme} {
		utilruntime.Must(add(composed.Scheme))
	}
}
