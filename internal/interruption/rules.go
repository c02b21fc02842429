// Package interruption describes the EventBridge rules that feed Karpenter's
// interruption queue: which AWS events, under which stable keys.
package interruption

import "encoding/json"

// A Rule is one EventBridge rule on the default bus whose events Karpenter
// handles. Key is part of the composed resource names and of
// status.ruleArns; Suffix is part of the AWS rule name. Both are API.
type Rule struct {
	Key        string
	Suffix     string
	Source     string
	DetailType string
}

// Rules are the five events Karpenter reacts to, in a fixed order.
var Rules = []Rule{
	{Key: "health", Suffix: "health", Source: "aws.health", DetailType: "AWS Health Event"},
	{Key: "spot-interruption", Suffix: "spot", Source: "aws.ec2", DetailType: "EC2 Spot Instance Interruption Warning"},
	{Key: "rebalance", Suffix: "rebalance", Source: "aws.ec2", DetailType: "EC2 Instance Rebalance Recommendation"},
	{Key: "state-change", Suffix: "state", Source: "aws.ec2", DetailType: "EC2 Instance State-change Notification"},
	{Key: "capacity-reservation", Suffix: "capacity", Source: "aws.ec2", DetailType: "EC2 Capacity Reservation Instance Interruption Warning"},
}

// Pattern is an EventBridge event pattern matching on source and detail-type.
type Pattern struct {
	Source     []string `json:"source"`
	DetailType []string `json:"detail-type"`
}

// EventPattern returns the rule's event pattern as the JSON EventBridge reads.
func (r Rule) EventPattern() string {
	b, err := json.Marshal(Pattern{Source: []string{r.Source}, DetailType: []string{r.DetailType}})
	if err != nil {
		// Marshalling two string slices cannot fail.
		panic(err)
	}
	return string(b)
}
