package awsres

import (
	"testing"

	iam "github.com/upbound/provider-aws/v2/apis/cluster/iam/v1beta1"
	sqs "github.com/upbound/provider-aws/v2/apis/cluster/sqs/v1beta1"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/do-now/function-karpenter/internal/config"
	"github.com/do-now/function-karpenter/internal/config/configtest"
	"github.com/do-now/function-karpenter/internal/interruption"
)

// The claimed cluster of the isolation tests, in its account.
const isolationAccount = "111122223333"

// isolationConfig is a claim for prod-eu, as the function loads it with the
// platform's input, with what the observed EKS cluster reports.
func isolationConfig(t *testing.T, input map[string]any) *config.Config {
	t.Helper()
	in, err := structpb.NewStruct(configtest.Pinned(input))
	if err != nil {
		t.Fatal(err)
	}
	c, errs := config.Load(config.Owner{Namespace: "team-a", Name: "karpenter"}, map[string]any{
		"cluster":      map[string]any{"name": "prod-eu", "region": "eu-west-3"},
		"nodeIdentity": map[string]any{"roleArn": "arn:aws:iam::" + isolationAccount + ":role/nodes", "instanceProfile": "nodes"},
	}, in)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	c.ClusterVPC = clusterVPC
	return c
}

// controllerDocument is the controller role's inline policy exactly as step
// one composes it.
func controllerDocument(t *testing.T, c *config.Config) string {
	t.Helper()
	step1, err := Identity(c)
	if err != nil {
		t.Fatal(err)
	}
	rp, ok := step1[ControllerRolePolicy].(*iam.RolePolicy)
	if !ok || rp.Spec.ForProvider.Policy == nil {
		t.Fatalf("step one composes no controller policy: %v", step1[ControllerRolePolicy])
	}
	return *rp.Spec.ForProvider.Policy
}

// TestQueueHearsOnlyTheRules evaluates the queue policy step two composes,
// with the identity-based policies of the callers: no principal of the
// account may forge an interruption message whatever its own policy
// grants, only the five rules may send, and only the controller may read
// or delete; the platform's provider-aws still manages the queue.
func TestQueueHearsOnlyTheRules(t *testing.T) {
	c := isolationConfig(t, nil)
	queueARN := c.Account.QueueARN(c.Names.Queue)
	rules := map[string]string{}
	for _, r := range interruption.Rules {
		rules[r.Key] = "arn:aws:events:eu-west-3:" + isolationAccount + ":rule/" + c.Names.Rules[r.Key]
	}
	role := c.Account.RoleARN(c.Names.RolePath, c.Names.Role)
	step2 := Wiring(c, Observed{RoleARN: role, QueueARN: queueARN, RuleARNs: rules})
	qp, ok := step2[InterruptionQueuePolicy].(*sqs.QueuePolicy)
	if !ok || qp.Spec.ForProvider.Policy == nil {
		t.Fatalf("step two composes no queue policy: %v", step2[InterruptionQueuePolicy])
	}
	queuePolicy := *qp.Spec.ForProvider.Policy

	// Identity-based policies: the intruder's and the platform's grant
	// every SQS action on every queue; the controller's is the one step one
	// composes.
	const everySQSAction = `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"sqs:*","Resource":"*"}]}`
	intruder := "arn:aws:iam::" + isolationAccount + ":role/intruder"
	platform := "arn:aws:iam::" + isolationAccount + ":role/crossplane/provider-aws"
	controller := controllerDocument(t, c)
	anyRule := rules[interruption.Rules[0].Key]

	cases := map[string]struct {
		reason   string
		req      request
		identity []string
		want     decision
	}{
		"ForgedMessage": {
			reason:   "A principal of the account whose own policy grants sqs:SendMessage must not send: there is no rule it sends for.",
			req:      request{Principal: intruder, Action: "sqs:SendMessage"},
			identity: []string{everySQSAction},
			want:     explicitDenied,
		},
		"ForgedMessageClaimingARule": {
			reason:   "Naming a rule in the message changes nothing: aws:SourceArn is only set by a service acting for a resource.",
			req:      request{Principal: intruder, Action: "sqs:SendMessage", Context: map[string][]string{"aws:SourceAccount": {isolationAccount}}},
			identity: []string{everySQSAction},
			want:     explicitDenied,
		},
		"ControllerSends": {
			reason:   "Not even the controller sends to its queue.",
			req:      request{Principal: role, Action: "sqs:SendMessage"},
			identity: []string{controller},
			want:     explicitDenied,
		},
		"RuleSends": {
			reason: "EventBridge sending for one of the five rules is what the queue is for.",
			req:    request{Service: "events.amazonaws.com", Action: "sqs:SendMessage", Context: map[string][]string{"aws:SourceArn": {anyRule}}},
			want:   allowed,
		},
		"EveryRuleSends": {
			reason: "The last of the five rules too.",
			req:    request{Service: "events.amazonaws.com", Action: "sqs:SendMessage", Context: map[string][]string{"aws:SourceArn": {rules[interruption.Rules[len(interruption.Rules)-1].Key]}}},
			want:   allowed,
		},
		"AnotherRuleSends": {
			reason: "EventBridge sending for any other rule, of this account or another, must be refused.",
			req:    request{Service: "events.amazonaws.com", Action: "sqs:SendMessage", Context: map[string][]string{"aws:SourceArn": {"arn:aws:events:eu-west-3:444455556666:rule/prod-eu-karpenter-spot"}}},
			want:   explicitDenied,
		},
		"IntruderReceives": {
			reason:   "Another role of the account must not receive the controller's messages, whatever its own policy grants.",
			req:      request{Principal: intruder, Action: "sqs:ReceiveMessage"},
			identity: []string{everySQSAction},
			want:     explicitDenied,
		},
		"IntruderDeletes": {
			reason:   "Nor delete them.",
			req:      request{Principal: intruder, Action: "sqs:DeleteMessage"},
			identity: []string{everySQSAction},
			want:     explicitDenied,
		},
		"ControllerReceives": {
			reason:   "The controller role receives, with the policy step one composes.",
			req:      request{Principal: role, Action: "sqs:ReceiveMessage"},
			identity: []string{controller},
			want:     allowed,
		},
		"ControllerDeletes": {
			reason:   "And deletes what it handled.",
			req:      request{Principal: role, Action: "sqs:DeleteMessage"},
			identity: []string{controller},
			want:     allowed,
		},
		"ControllerFindsTheQueue": {
			reason:   "And finds the queue by name, as Karpenter does first.",
			req:      request{Principal: role, Action: "sqs:GetQueueUrl"},
			identity: []string{controller},
			want:     allowed,
		},
		"PlatformSetsAttributes": {
			reason:   "provider-aws, as the platform runs it, still manages the queue and its policy: no Deny locks it out.",
			req:      request{Principal: platform, Action: "sqs:SetQueueAttributes"},
			identity: []string{everySQSAction},
			want:     allowed,
		},
		"PlatformReadsAttributes": {
			reason:   "And reads them back.",
			req:      request{Principal: platform, Action: "sqs:GetQueueAttributes"},
			identity: []string{everySQSAction},
			want:     allowed,
		},
		"PlatformDeletesTheQueue": {
			reason:   "And deletes the queue when the claim goes.",
			req:      request{Principal: platform, Action: "sqs:DeleteQueue"},
			identity: []string{everySQSAction},
			want:     allowed,
		},
		"PlainHTTP": {
			reason:   "Every request without TLS is refused, the controller's too.",
			req:      request{Principal: role, Action: "sqs:ReceiveMessage", Context: map[string][]string{"aws:SecureTransport": {"false"}}},
			identity: []string{controller},
			want:     explicitDenied,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := tc.req
			req.Resource = queueARN
			ctx := map[string][]string{"aws:SecureTransport": {"true"}}
			for k, v := range req.Context {
				ctx[k] = v
			}
			req.Context = ctx
			if got := evaluate(t, req, tc.identity, []string{queuePolicy}); got != tc.want {
				t.Errorf("\n%s\n%s by %s%s (context %v) under the composed queue policy: %s, want %s", tc.reason, req.Action, req.Principal, req.Service, tc.req.Context, got, tc.want)
			}
		})
	}
}
