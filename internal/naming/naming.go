// Package naming derives every AWS name and ARN from the cluster name and
// checks them against AWS limits before anything is emitted. Names are
// deterministic per cluster so several clusters share one account.
package naming

import (
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/do-now/function-karpenter/internal/interruption"
)

// AWS limits, in characters.
const (
	MaxRoleName       = 64
	MaxRolePath       = 512
	MaxRolePolicyName = 128
	MaxQueueName      = 80
	MaxRuleName       = 64
	// MaxInlinePolicy is the size limit of all inline policies of one role,
	// counted without whitespace.
	MaxInlinePolicy = 10240
)

// Base is the part every AWS name of a cluster starts with.
const Base = "-karpenter"

// TargetID is the EventBridge target ID of the queue on every rule. Target IDs
// are unique per rule, so one fixed ID suffices.
const TargetID = "karpenter-interruption-queue"

// FinalCheckServiceAccount is the final check's ServiceAccount in the
// controller's namespace: its Deployment, Role and RoleBinding there share
// the name, and its IAM role trusts that ServiceAccount alone.
const FinalCheckServiceAccount = "karpenter-final-check"

// Names are the AWS names of one cluster's resources.
type Names struct {
	Role       string
	RolePath   string
	RolePolicy string
	// FinalCheckRole is the final check's own role, under RolePath, and
	// FinalCheckRolePolicy its inline policy: it lists instances and
	// nothing more.
	FinalCheckRole       string
	FinalCheckRolePolicy string
	Queue                string
	// Rules maps an interruption rule key to its AWS rule name.
	Rules map[string]string
}

// For returns the names of cluster's resources, with the role under
// <pathPrefix><cluster>/.
func For(cluster, pathPrefix string) Names {
	base := cluster + Base
	n := Names{
		Role:       base,
		RolePath:   pathPrefix + cluster + "/",
		RolePolicy: base + "-controller",
		// "-final", not "-final-check": a 44-character cluster name (the
		// longest the API allows, for the rule names) keeps it within
		// MaxRoleName.
		FinalCheckRole:       base + "-final",
		FinalCheckRolePolicy: base + "-final-check",
		Queue:                base,
		Rules:                make(map[string]string, len(interruption.Rules)),
	}
	for _, r := range interruption.Rules {
		n.Rules[r.Key] = base + "-" + r.Suffix
	}
	return n
}

// Check reports every name over its AWS limit against the cluster name field,
// since that is the only tenant input names grow with.
func (n Names) Check(cluster *field.Path) field.ErrorList {
	var errs field.ErrorList
	// Every name starts with the cluster name followed by Base.
	value := strings.TrimSuffix(n.Role, Base)
	check := func(what, name string, limit int) {
		if len(name) > limit {
			errs = append(errs, field.Invalid(cluster, value,
				fmt.Sprintf("%s name %q is %d characters, over the AWS limit of %d", what, name, len(name), limit)))
		}
	}
	check("IAM role", n.Role, MaxRoleName)
	check("IAM role path", n.RolePath, MaxRolePath)
	check("IAM role policy", n.RolePolicy, MaxRolePolicyName)
	check("IAM role", n.FinalCheckRole, MaxRoleName)
	check("IAM role policy", n.FinalCheckRolePolicy, MaxRolePolicyName)
	check("SQS queue", n.Queue, MaxQueueName)
	for _, r := range interruption.Rules {
		check("EventBridge rule", n.Rules[r.Key], MaxRuleName)
	}
	return errs
}

// A Partition is an AWS partition: aws, aws-cn or aws-us-gov.
type Partition string

// DNSSuffix is the partition's domain, for service principals and endpoints.
func (p Partition) DNSSuffix() string {
	if p == "aws-cn" {
		return "amazonaws.com.cn"
	}
	return "amazonaws.com"
}

// Account is where ARNs are built: a partition, an account, a region.
type Account struct {
	Partition Partition
	ID        string
	Region    string
}

// RoleARN is the ARN of an IAM role (IAM is global: no region).
func (a Account) RoleARN(path, name string) string {
	return fmt.Sprintf("arn:%s:iam::%s:role%s%s", a.Partition, a.ID, path, name)
}

// QueueARN is the ARN of an SQS queue.
func (a Account) QueueARN(name string) string {
	return fmt.Sprintf("arn:%s:sqs:%s:%s:%s", a.Partition, a.Region, a.ID, name)
}

// QueueURL is the URL of an SQS queue.
func (a Account) QueueURL(name string) string {
	return fmt.Sprintf("https://sqs.%s.%s/%s/%s", a.Region, a.Partition.DNSSuffix(), a.ID, name)
}

// RuleARN is the ARN of a rule on the default event bus.
func (a Account) RuleARN(name string) string {
	return fmt.Sprintf("arn:%s:events:%s:%s:rule/%s", a.Partition, a.Region, a.ID, name)
}

// ClusterARN is the ARN of an EKS cluster.
func (a Account) ClusterARN(name string) string {
	return fmt.Sprintf("arn:%s:eks:%s:%s:cluster/%s", a.Partition, a.Region, a.ID, name)
}

// ARN formats of the IAM identities tenants and platforms name.
var (
	roleARN   = regexp.MustCompile(`^arn:(aws|aws-cn|aws-us-gov):iam::([0-9]{12}):role(/|/[A-Za-z0-9+=,.@_-]+(?:/[A-Za-z0-9+=,.@_-]+)*/)([A-Za-z0-9+=,.@_-]{1,64})$`)
	policyARN = regexp.MustCompile(`^arn:(aws|aws-cn|aws-us-gov):iam::([0-9]{12}|aws):policy/([A-Za-z0-9+=,.@_-]+/)*[A-Za-z0-9+=,.@_-]{1,128}$`)
)

// A RoleARN is a parsed IAM role ARN.
type RoleARN struct {
	ARN       string
	Partition Partition
	Account   string
	Path      string
	Name      string
}

// ParseRoleARN parses an IAM role ARN, path included.
func ParseRoleARN(s string) (RoleARN, error) {
	m := roleARN.FindStringSubmatch(s)
	if m == nil {
		return RoleARN{}, fmt.Errorf("%q is not an IAM role ARN (arn:<partition>:iam::<12-digit account>:role/[path/]<name>)", s)
	}
	return RoleARN{ARN: s, Partition: Partition(m[1]), Account: m[2], Path: m[3], Name: m[4]}, nil
}

// ParsePolicyARN returns the partition of an IAM managed policy ARN.
func ParsePolicyARN(s string) (Partition, error) {
	m := policyARN.FindStringSubmatch(s)
	if m == nil {
		return "", fmt.Errorf("%q is not an IAM policy ARN (arn:<partition>:iam::<account>:policy/[path/]<name>)", s)
	}
	return Partition(m[1]), nil
}
