package policy

// EventsPrincipal is the EventBridge service principal.
const EventsPrincipal = "events.amazonaws.com"

// InterruptionQueue is the resource policy of the interruption queue: only
// EventBridge may send to it, and only on behalf of the given rules; every
// request that does not use TLS is denied.
func InterruptionQueue(queueARN string, ruleARNs []string) Document {
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
