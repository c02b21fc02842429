package awsres

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// A stand-in for IAM's policy evaluation, as test code: no emulator on this
// machine evaluates IAM (moto's dry runs never fail, and its queues ignore
// their policies), so the isolation tests judge the documents the function
// composes with this. It implements only what those documents use, as
// AWS documents it, and refuses anything else (t.Fatal) rather than guess:
//
//   - Policy evaluation for requests within a single account: an explicit
//     Deny in any policy wins; otherwise an Allow in the identity-based or
//     the resource-based policy allows; otherwise the request is implicitly
//     denied.
//     https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic_policy-eval-basics.html
//     https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic_policy-eval-denyallow.html
//   - Condition operators: a key absent from the request context makes a
//     condition false, except for a negated operator (StringNotEquals,
//     ArnNotEquals, ArnNotLike, …), which is then true, and for
//     …IfExists, which is then true; ArnEquals and ArnLike compare each of
//     the six colon-separated parts of an ARN on its own, with * and ?.
//     https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html
//   - Several operators, and several keys of one operator, must all hold
//     (AND); several values of one key, any (OR); of a negated operator,
//     none (NOR); ForAllValues holds for an absent or empty key.
//     https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-logic-multiple-context-keys-or-values.html
//
// Not implemented: NotAction, NotResource, NotPrincipal, policy variables,
// cross-account requests, SCPs, RCPs, permission boundaries and session
// policies.

// A request is one authorization IAM makes for an API call: who, what, on
// which resource, with which context keys.
type request struct {
	// Principal is the caller's ARN, for an IAM role the role's (what
	// aws:PrincipalArn holds); empty for an AWS service.
	Principal string
	// Service is the calling service principal (events.amazonaws.com),
	// empty for an IAM principal.
	Service  string
	Action   string
	Resource string
	// Context are the request's condition keys besides aws:PrincipalArn,
	// which Principal sets.
	Context map[string][]string
}

// A decision is what IAM answers.
type decision string

const (
	allowed        decision = "Allow"
	explicitDenied decision = "ExplicitDeny"
	implicitDenied decision = "ImplicitDeny"
)

// evaluate decides req against the caller's identity-based policies and the
// resource's resource-based policies, all documents as JSON.
func evaluate(t *testing.T, req request, identity, resource []string) decision {
	t.Helper()
	ctx := map[string][]string{}
	for k, v := range req.Context {
		ctx[strings.ToLower(k)] = v // condition key names are case-insensitive
	}
	if req.Principal != "" {
		ctx["aws:principalarn"] = []string{req.Principal}
	}
	allow := false
	judge := func(doc string, resourceBased bool) bool {
		for _, s := range parseStatements(t, doc) {
			if resourceBased && !s.principalMatches(t, req) {
				continue
			}
			if !resourceBased && s.Principal != nil {
				t.Fatalf("an identity-based policy names a Principal: %s", doc)
			}
			if !anyGlob(s.Action, req.Action, true) || !anyGlob(s.Resource, req.Resource, false) || !conditionsHold(t, s.Condition, ctx) {
				continue
			}
			switch s.Effect {
			case "Deny":
				return true
			case "Allow":
				allow = true
			default:
				t.Fatalf("statement %q: unknown Effect %q", s.Sid, s.Effect)
			}
		}
		return false
	}
	for _, doc := range identity {
		if judge(doc, false) {
			return explicitDenied
		}
	}
	for _, doc := range resource {
		if judge(doc, true) {
			return explicitDenied
		}
	}
	if allow {
		return allowed
	}
	return implicitDenied
}

// A statement as IAM reads it.
type statement struct {
	Sid       string
	Effect    string
	Principal json.RawMessage
	Action    oneOrMore
	Resource  oneOrMore
	Condition map[string]map[string]oneOrMore
}

func parseStatements(t *testing.T, doc string) []statement {
	t.Helper()
	var d struct {
		Statement []statement
	}
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		t.Fatalf("cannot parse policy %s: %v", doc, err)
	}
	var raw struct {
		Statement []map[string]json.RawMessage
	}
	_ = json.Unmarshal([]byte(doc), &raw)
	for _, s := range raw.Statement {
		for _, k := range []string{"NotAction", "NotResource", "NotPrincipal"} {
			if _, ok := s[k]; ok {
				t.Fatalf("the evaluator does not implement %s: %s", k, doc)
			}
		}
	}
	return d.Statement
}

// principalMatches: "*" is everyone; {"AWS": [...]} names IAM principals
// by ARN; {"Service": [...]} names service principals.
func (s statement) principalMatches(t *testing.T, req request) bool {
	t.Helper()
	var everyone string
	if json.Unmarshal(s.Principal, &everyone) == nil {
		if everyone != "*" {
			t.Fatalf("statement %q: Principal %q", s.Sid, everyone)
		}
		return true
	}
	var p map[string]oneOrMore
	if err := json.Unmarshal(s.Principal, &p); err != nil {
		t.Fatalf("statement %q: a resource-based policy statement needs a Principal: %v", s.Sid, err)
	}
	for kind, ids := range p {
		switch kind {
		case "AWS":
			if req.Principal != "" && (slices.Contains(ids, req.Principal) || slices.Contains(ids, "*")) {
				return true
			}
		case "Service":
			if req.Service != "" && slices.Contains(ids, req.Service) {
				return true
			}
		default:
			t.Fatalf("statement %q: the evaluator does not implement Principal %s", s.Sid, kind)
		}
	}
	return false
}

// oneOrMore is a policy value that may be one string or a list of them.
type oneOrMore []string

func (o *oneOrMore) UnmarshalJSON(b []byte) error {
	var one string
	if json.Unmarshal(b, &one) == nil {
		*o = []string{one}
		return nil
	}
	return json.Unmarshal(b, (*[]string)(o))
}

// conditionsHold evaluates a Condition block: every operator and every key
// must hold.
func conditionsHold(t *testing.T, cond map[string]map[string]oneOrMore, ctx map[string][]string) bool {
	t.Helper()
	for op, keys := range cond {
		for key, want := range keys {
			got, present := ctx[strings.ToLower(key)]
			if !operatorHolds(t, op, want, got, present && len(got) > 0) {
				return false
			}
		}
	}
	return true
}

func operatorHolds(t *testing.T, op string, want, got []string, present bool) bool {
	t.Helper()
	set := ""
	if i := strings.Index(op, ":"); i >= 0 {
		set, op = op[:i], op[i+1:]
	}
	ifExists := strings.HasSuffix(op, "IfExists")
	op = strings.TrimSuffix(op, "IfExists")
	var match func(pattern, value string) bool
	negated := false
	switch op {
	case "StringEquals":
		match = func(p, v string) bool { return p == v }
	case "StringNotEquals":
		match, negated = func(p, v string) bool { return p == v }, true
	case "StringLike":
		match = func(p, v string) bool { return glob(p, v, false) }
	case "StringNotLike":
		match, negated = func(p, v string) bool { return glob(p, v, false) }, true
	case "ArnEquals", "ArnLike":
		match = arnMatches
	case "ArnNotEquals", "ArnNotLike":
		match, negated = arnMatches, true
	case "Bool":
		match = strings.EqualFold
	default:
		t.Fatalf("the evaluator does not implement condition operator %s", op)
	}
	matchesAny := func(v string) bool {
		for _, p := range want {
			if match(p, v) {
				return true
			}
		}
		return false
	}
	switch set {
	case "ForAllValues":
		if negated {
			t.Fatalf("the evaluator does not implement ForAllValues with a negated operator")
		}
		return all(got, matchesAny) // true for an absent or empty key
	case "":
	default:
		t.Fatalf("the evaluator does not implement set operator %s", set)
	}
	if !present {
		return ifExists || negated
	}
	// A single-valued key: one value in the context.
	if len(got) != 1 {
		t.Fatalf("key with %d values needs a set operator", len(got))
	}
	return matchesAny(got[0]) != negated
}

// arnMatches compares an ARN with a pattern part by part, as ArnEquals and
// ArnLike do.
func arnMatches(pattern, arn string) bool {
	p, a := strings.SplitN(pattern, ":", 6), strings.SplitN(arn, ":", 6)
	if len(p) != 6 || len(a) != 6 {
		return false
	}
	for i := range p {
		if !glob(p[i], a[i], false) {
			return false
		}
	}
	return true
}

// glob matches IAM's wildcards: * any run, ? one character.
func glob(pattern, s string, fold bool) bool {
	if fold {
		pattern, s = strings.ToLower(pattern), strings.ToLower(s)
	}
	re := "^" + strings.NewReplacer(`\*`, ".*", `\?`, ".").Replace(regexp.QuoteMeta(pattern)) + "$"
	return regexp.MustCompile(re).MatchString(s)
}

func anyGlob(patterns []string, s string, fold bool) bool {
	for _, p := range patterns {
		if glob(p, s, fold) {
			return true
		}
	}
	return false
}

func all(vs []string, f func(string) bool) bool {
	for _, v := range vs {
		if !f(v) {
			return false
		}
	}
	return true
}

// TestEvaluatorFollowsIAM holds the stand-in evaluator to the rules it cites,
// on hand-written documents, so that the tests above cannot pass on an
// evaluator that allows or denies too much.
func TestEvaluatorFollowsIAM(t *testing.T) {
	const role = "arn:aws:iam::111122223333:role/r"
	doc := func(statements string) string { return `{"Version":"2012-10-17","Statement":[` + statements + `]}` }
	allowAll := doc(`{"Effect":"Allow","Action":"*","Resource":"*"}`)
	cases := map[string]struct {
		reason   string
		req      request
		identity []string
		resource []string
		want     decision
	}{
		"NothingGranted": {
			reason: "Without an Allow, a request is implicitly denied.",
			req:    request{Principal: role, Action: "sqs:SendMessage", Resource: "arn:aws:sqs:eu-west-3:111122223333:q"},
			want:   implicitDenied,
		},
		"DenyWins": {
			reason:   "An explicit Deny in the resource policy overrides the identity policy's Allow.",
			req:      request{Principal: role, Action: "sqs:SendMessage", Resource: "arn:aws:sqs:eu-west-3:111122223333:q"},
			identity: []string{allowAll},
			resource: []string{doc(`{"Effect":"Deny","Principal":"*","Action":"sqs:SendMessage","Resource":"*"}`)},
			want:     explicitDenied,
		},
		"ResourcePolicyAlone": {
			reason:   "Within one account, the resource policy's Allow is enough.",
			req:      request{Service: "events.amazonaws.com", Action: "sqs:SendMessage", Resource: "arn:aws:sqs:eu-west-3:111122223333:q"},
			resource: []string{doc(`{"Effect":"Allow","Principal":{"Service":"events.amazonaws.com"},"Action":"sqs:SendMessage","Resource":"*"}`)},
			want:     allowed,
		},
		"OtherPrincipal": {
			reason:   "A resource policy statement applies only to the principals it names.",
			req:      request{Principal: role, Action: "sqs:SendMessage", Resource: "arn:aws:sqs:eu-west-3:111122223333:q"},
			resource: []string{doc(`{"Effect":"Allow","Principal":{"Service":"events.amazonaws.com"},"Action":"sqs:SendMessage","Resource":"*"}`)},
			want:     implicitDenied,
		},
		"PositiveOperatorMissingKey": {
			reason:   "A key absent from the request makes a positive operator false.",
			req:      request{Principal: role, Action: "ec2:RunInstances", Resource: "arn:aws:ec2:eu-west-3:111122223333:subnet/s"},
			identity: []string{doc(`{"Effect":"Allow","Action":"ec2:RunInstances","Resource":"*","Condition":{"ArnEquals":{"ec2:Vpc":"arn:aws:ec2:*:*:vpc/v"}}}`)},
			want:     implicitDenied,
		},
		"NegatedOperatorMissingKey": {
			reason:   "A key absent from the request makes a negated operator true.",
			req:      request{Principal: role, Action: "sqs:SendMessage", Resource: "arn:aws:sqs:eu-west-3:111122223333:q"},
			identity: []string{allowAll},
			resource: []string{doc(`{"Effect":"Deny","Principal":"*","Action":"sqs:SendMessage","Resource":"*","Condition":{"ArnNotEquals":{"aws:SourceArn":"arn:aws:events:eu-west-3:111122223333:rule/r"}}}`)},
			want:     explicitDenied,
		},
		"NegatedOperatorMatching": {
			reason:   "A negated operator is false when the value matches one of its values (NOR).",
			req:      request{Service: "events.amazonaws.com", Action: "sqs:SendMessage", Resource: "arn:aws:sqs:eu-west-3:111122223333:q", Context: map[string][]string{"aws:SourceArn": {"arn:aws:events:eu-west-3:111122223333:rule/b"}}},
			resource: []string{doc(`{"Effect":"Deny","Principal":"*","Action":"sqs:SendMessage","Resource":"*","Condition":{"ArnNotEquals":{"aws:SourceArn":["arn:aws:events:eu-west-3:111122223333:rule/a","arn:aws:events:eu-west-3:111122223333:rule/b"]}}},{"Effect":"Allow","Principal":{"Service":"events.amazonaws.com"},"Action":"sqs:SendMessage","Resource":"*"}`)},
			want:     allowed,
		},
		"IfExistsMissingKey": {
			reason:   "…IfExists holds when the key is absent.",
			req:      request{Principal: role, Action: "ec2:CreateTags", Resource: "arn:aws:ec2:eu-west-3:111122223333:instance/i"},
			identity: []string{doc(`{"Effect":"Allow","Action":"ec2:CreateTags","Resource":"*","Condition":{"StringEqualsIfExists":{"aws:RequestTag/x":"y"}}}`)},
			want:     allowed,
		},
		"ArnPartWildcard": {
			reason:   "ArnLike compares part by part: a wildcard account matches any account, not another region.",
			req:      request{Principal: role, Action: "ec2:RunInstances", Resource: "arn:aws:ec2:eu-west-3:111122223333:subnet/s", Context: map[string][]string{"ec2:Vpc": {"arn:aws:ec2:eu-west-1:111122223333:vpc/v"}}},
			identity: []string{doc(`{"Effect":"Allow","Action":"ec2:RunInstances","Resource":"*","Condition":{"ArnLike":{"ec2:Vpc":"arn:aws:ec2:eu-west-3:*:vpc/v"}}}`)},
			want:     implicitDenied,
		},
		"ActionCaseInsensitive": {
			reason:   "Actions match without regard to case.",
			req:      request{Principal: role, Action: "sqs:receivemessage", Resource: "arn:aws:sqs:eu-west-3:111122223333:q"},
			identity: []string{doc(`{"Effect":"Allow","Action":"sqs:ReceiveMessage","Resource":"arn:aws:sqs:eu-west-3:111122223333:q"}`)},
			want:     allowed,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := evaluate(t, tc.req, tc.identity, tc.resource); got != tc.want {
				t.Errorf("\n%s\nevaluate(...) = %s, want %s", tc.reason, got, tc.want)
			}
		})
	}
}
