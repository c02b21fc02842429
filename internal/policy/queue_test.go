package policy

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestInterruptionQueue(t *testing.T) {
	const queue = "arn:aws:sqs:eu-west-3:123456789012:prod-eu-karpenter"
	cases := map[string]struct {
		reason string
		queue  string
		rules  []string
		role   string
	}{
		"FiveRules": {
			reason: "EventBridge may send to the queue only on behalf of the cluster's own rules, all of them; nothing else may send, and only the controller role may receive or delete.",
			queue:  queue,
			role:   "arn:aws:iam::123456789012:role/socle/prod-eu/prod-eu-karpenter",
			rules: []string{
				"arn:aws:events:eu-west-3:123456789012:rule/prod-eu-karpenter-capacity",
				"arn:aws:events:eu-west-3:123456789012:rule/prod-eu-karpenter-health",
				"arn:aws:events:eu-west-3:123456789012:rule/prod-eu-karpenter-rebalance",
				"arn:aws:events:eu-west-3:123456789012:rule/prod-eu-karpenter-spot",
				"arn:aws:events:eu-west-3:123456789012:rule/prod-eu-karpenter-state",
			},
		},
		"OneRule": {
			reason: "A single rule is still a list of source ARNs, and no other rule may send.",
			queue:  "arn:aws-cn:sqs:cn-north-1:123456789012:prod-cn-karpenter",
			role:   "arn:aws-cn:iam::123456789012:role/prod-cn-karpenter",
			rules:  []string{"arn:aws-cn:events:cn-north-1:123456789012:rule/prod-cn-karpenter-health"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			doc := parseJSON(t, InterruptionQueue(tc.queue, tc.rules, tc.role).JSON())
			if v := doc["Version"]; v != "2012-10-17" {
				t.Errorf("\n%s\nInterruptionQueue(...): Version = %v, want 2012-10-17", tc.reason, v)
			}
			got := normaliseStatements(t, doc)
			for _, s := range got {
				delete(s, "Sid")
			}
			rules := make([]any, len(tc.rules))
			for i, r := range tc.rules {
				rules[i] = r
			}
			// Exactly these four statements, in Sid order (the Sids are not
			// compared): the rules' allow, the HTTP deny, the denials of
			// reading and of sending.
			want := []map[string]any{
				{
					"Effect":    "Allow",
					"Principal": map[string]any{"Service": []any{"events.amazonaws.com"}},
					"Action":    []any{"sqs:SendMessage"},
					"Resource":  []any{tc.queue},
					"Condition": map[string]any{"ArnEquals": map[string]any{"aws:SourceArn": rules}},
				},
				{
					"Effect":    "Deny",
					"Principal": "*",
					"Action":    []any{"sqs:*"},
					"Resource":  []any{tc.queue},
					"Condition": map[string]any{"Bool": map[string]any{"aws:SecureTransport": []any{"false"}}},
				},
				{
					"Effect":    "Deny",
					"Principal": "*",
					"Action":    []any{"sqs:DeleteMessage", "sqs:ReceiveMessage"},
					"Resource":  []any{tc.queue},
					"Condition": map[string]any{"ArnNotEquals": map[string]any{"aws:PrincipalArn": []any{tc.role}}},
				},
				{
					"Effect":    "Deny",
					"Principal": "*",
					"Action":    []any{"sqs:SendMessage"},
					"Resource":  []any{tc.queue},
					"Condition": map[string]any{"ArnNotEquals": map[string]any{"aws:SourceArn": rules}},
				},
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("\n%s\nInterruptionQueue(...): -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}
