package awsres

import (
	"github.com/crossplane/function-sdk-go/resource"

	"github.com/do-now/function-karpenter/internal/interruption"
)

// Observed are the identifiers AWS reported for the resources of step one.
// A field is empty until the provider has written it.
type Observed struct {
	RoleARN  string
	QueueURL string
	QueueARN string
	// RuleARNs maps an interruption rule key to its ARN.
	RuleARNs map[string]string
}

// ReadObserved reads the identifiers providers wrote into status.atProvider.
func ReadObserved(ocds map[resource.Name]resource.ObservedComposed) Observed {
	get := func(name resource.Name, path string) string {
		ocd, ok := ocds[name]
		if !ok {
			return ""
		}
		s, _ := ocd.Resource.GetString(path)
		return s
	}
	o := Observed{
		RoleARN:  get(ControllerRole, "status.atProvider.arn"),
		QueueURL: get(InterruptionQueue, "status.atProvider.url"),
		QueueARN: get(InterruptionQueue, "status.atProvider.arn"),
		RuleARNs: map[string]string{},
	}
	for _, r := range interruption.Rules {
		if arn := get(RuleResource(r), "status.atProvider.arn"); arn != "" {
			o.RuleARNs[r.Key] = arn
		}
	}
	return o
}
