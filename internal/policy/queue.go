package policy

// EventsPrincipal is the EventBridge service principal.
const EventsPrincipal = "events.amazonaws.com"

// InterruptionQueue is the resource policy of the interruption queue:
// EventBridge may send to it on behalf of the given rules; nothing else may
// send, whatever its own policy grants; only the controller role may
// receive and delete; every request that does not use TLS is denied.
//
// The denials are what makes this hold against principals of the account:
// within one account an identity-based policy that allows sqs:SendMessage
// is enough without any grant here, and only an explicit Deny overrides it
// (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic_policy-eval-basics.html).
// Both use a negated ARN operator, which is true when its key is absent
// from the request (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html):
// a principal calling SendMessage itself carries no aws:SourceArn (a
// service sets it when it acts for one of its resources), so it is denied;
// every signed request carries aws:PrincipalArn, for a role's session the
// role's ARN, path included
// (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html).
//
// What is denied is only what moves messages: Karpenter's controller calls
// GetQueueUrl, ReceiveMessage and DeleteMessage (pkg/providers/sqs), and
// only the last two read or drop an event. Queue management
// (CreateQueue, Get/SetQueueAttributes, tagging, DeleteQueue) stays with
// the identity policies, so the platform's provider-aws, which manages the
// queue and this policy, is never locked out.
func InterruptionQueue(queueARN string, ruleARNs []string, controllerRoleARN string) Document {
	return Document{
		Version: Version,
		ID:      "EC2InterruptionPolicy",
		Statement: []Statement{
			{
				Sid:       "AllowInterruptionRulesToSend",
				Effect:    Allow,
				Principal: &Principal{Service: one(EventsPrincipal)},
				Action:    one("sqs:SendMessage"),
				Resource:  one(queueARN),
				Condition: Condition{"ArnEquals": {"aws:SourceArn": ruleARNs}},
			},
			{
				Sid:       "DenySendingButForTheRules",
				Effect:    Deny,
				Principal: &Principal{Everyone: true},
				Action:    one("sqs:SendMessage"),
				Resource:  one(queueARN),
				Condition: Condition{"ArnNotEquals": {"aws:SourceArn": ruleARNs}},
			},
			{
				Sid:       "DenyReadingButForTheController",
				Effect:    Deny,
				Principal: &Principal{Everyone: true},
				Action:    []string{"sqs:DeleteMessage", "sqs:ReceiveMessage"},
				Resource:  one(queueARN),
				Condition: Condition{"ArnNotEquals": {"aws:PrincipalArn": one(controllerRoleARN)}},
			},
			{
				Sid:       "DenyHTTP",
				Effect:    Deny,
				Principal: &Principal{Everyone: true},
				Action:    one("sqs:*"),
				Resource:  one(queueARN),
				Condition: Condition{"Bool": {"aws:SecureTransport": one("false")}},
			},
		},
	}
}
