//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// What the fake provider-aws does in AWS, the shard's emulator: each managed resource of an
// emulated kind is created, updated and deleted there through the SDK from its spec.forProvider,
// and its status.atProvider is what the emulator answers. Names are the external names
// provider-aws v2.5.0 gives each kind (config/externalname.go: aws_iam_role and aws_eks_cluster
// NameAsIdentifier, aws_iam_role_policy the name with the id "role:name", aws_sqs_queue and
// aws_sqs_queue_policy IdentifierFromProvider, the queue's URL, aws_cloudwatch_event_rule the name
// with the id "bus/name", aws_cloudwatch_event_target the id "bus/rule/target_id"). The EKS Pod
// Identity association is not emulated: moto 5.2.1 has no Pod Identity API (eks/urls.py routes
// clusters, node groups, Fargate profiles and tags only; a 404, ../shared/TOOLCHAIN.md), so its
// atProvider stays derived (atProvider).

// emulated tells whether the fake plays a kind in the emulator.
func emulated(kind string) bool {
	switch kind {
	case "Role", "RolePolicy", "Queue", "QueuePolicy", "Rule", "Target", "Cluster":
		return true
	}
	return false
}

// forProvider is a managed resource's spec.forProvider with the fields it reads marked: apply
// refuses a resource with a field the fake does not play, so that a field the function starts
// setting is never silently left out of AWS.
type forProvider struct {
	fields map[string]any
	read   map[string]bool
}

func forProviderOf(u *unstructured.Unstructured) *forProvider {
	fp, _, _ := unstructured.NestedMap(u.Object, "spec", "forProvider")
	return &forProvider{fields: fp, read: map[string]bool{"region": true}}
}

func (p *forProvider) str(key string) string {
	p.read[key] = true
	s, _ := p.fields[key].(string)
	return s
}

// optional is the field as the SDK takes an unset string: nil.
func (p *forProvider) optional(key string) *string {
	if s := p.str(key); s != "" {
		return &s
	}
	return nil
}

func (p *forProvider) tags() map[string]string {
	p.read["tags"] = true
	out := map[string]string{}
	m, _ := p.fields["tags"].(map[string]any)
	for k, v := range m {
		out[k], _ = v.(string)
	}
	return out
}

// unplayed fails for a field nothing read.
func (p *forProvider) unplayed(kind string) error {
	for _, k := range slices.Sorted(maps.Keys(p.fields)) {
		if !p.read[k] {
			return fmt.Errorf("the e2e fake provider-aws does not play spec.forProvider.%s of a %s", k, kind)
		}
	}
	return nil
}

// apply makes the AWS resource u stands for what its spec says, creating it or updating it, and
// returns its status.atProvider as the emulator reports it. outOfBand is a statement someone
// added to a RolePolicy's document in AWS beside the provider's (want.outOfBand), put there too.
// An error is the emulator's refusal, or a field the fake does not play.
func (a *emulatedAWS) apply(ctx context.Context, u *unstructured.Unstructured, outOfBand map[string]any) (map[string]any, error) {
	p := forProviderOf(u)
	name := u.GetAnnotations()[externalNameAnno]
	var at map[string]any
	var err error
	switch u.GetKind() {
	case "Role":
		at, err = a.applyRole(ctx, name, p)
	case "RolePolicy":
		at, err = a.applyRolePolicy(ctx, name, p, outOfBand)
	case "Queue":
		at, err = a.applyQueue(ctx, p)
	case "QueuePolicy":
		at, err = a.applyQueuePolicy(ctx, p)
	case "Rule":
		at, err = a.applyRule(ctx, name, p)
	case "Target":
		at, err = a.applyTarget(ctx, p)
	case "Cluster":
		at, err = a.observeCluster(ctx, name, p, strings.Contains(u.GetAPIVersion(), ".m."))
	default:
		return nil, fmt.Errorf("the e2e fake provider-aws does not emulate a %s", u.GetKind())
	}
	if err != nil {
		return nil, err
	}
	return at, p.unplayed(u.GetKind())
}

// remove deletes the AWS resource u stands for; nil when it is gone already. The observe-only
// EKS cluster deletes nothing.
func (a *emulatedAWS) remove(ctx context.Context, u *unstructured.Unstructured) error {
	p := forProviderOf(u)
	name := u.GetAnnotations()[externalNameAnno]
	var err error
	switch u.GetKind() {
	case "Role":
		// moto, as IAM, refuses to delete a role that still has an inline policy
		// (DeleteConflict, moto 5.2.1 iam/models.py delete_role); provider-aws' Terraform
		// retries that refusal (upbound/terraform-provider-aws internal/service/iam/role.go,
		// deleteRole: RetryWhenIsA DeleteConflictException), as the fake does at its next try.
		_, err = a.iam.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: aws.String(name)})
	case "RolePolicy":
		_, err = a.iam.DeleteRolePolicy(ctx, &iam.DeleteRolePolicyInput{RoleName: aws.String(p.str("role")), PolicyName: aws.String(name)})
	case "Queue":
		var url string
		if url, err = a.queueURL(ctx, p); err == nil {
			_, err = a.sqs.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(url)}, sqsRegion(p.str("region")))
		}
	case "QueuePolicy":
		// As Terraform deletes aws_sqs_queue_policy: the queue's Policy set empty.
		_, err = a.sqs.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(p.str("queueUrl")),
			Attributes: map[string]string{string(sqstypes.QueueAttributeNamePolicy): ""}}, sqsRegion(p.str("region")))
	case "Rule":
		// moto refuses to delete a rule that still has targets ("Rule can't be deleted since it
		// has targets.", moto 5.2.1 events/models.py delete_rule), as EventBridge does: the
		// function's Usages delete each target first (docs/design.md).
		_, err = a.events.DeleteRule(ctx, &eventbridge.DeleteRuleInput{Name: aws.String(name), EventBusName: p.optional("eventBusName")},
			eventsRegion(p.str("region")))
	case "Target":
		_, err = a.events.RemoveTargets(ctx, &eventbridge.RemoveTargetsInput{Rule: aws.String(p.str("rule")),
			EventBusName: p.optional("eventBusName"), Ids: []string{p.str("targetId")}}, eventsRegion(p.str("region")))
	}
	if gone(err) {
		return nil
	}
	return err
}

// stale are the tag keys a resource holds that its spec no longer sets.
func stale(held []string, tags map[string]string) []string {
	var out []string
	for _, k := range held {
		if _, keep := tags[k]; !keep {
			out = append(out, k)
		}
	}
	return out
}

// gone tells whether an error says the resource does not exist.
func gone(err error) bool {
	return isAWSError[*iamtypes.NoSuchEntityException](err) || isAWSError[*sqstypes.QueueDoesNotExist](err) ||
		isAWSError[*ebtypes.ResourceNotFoundException](err)
}

func (a *emulatedAWS) applyRole(ctx context.Context, name string, p *forProvider) (map[string]any, error) {
	trust, path, boundary := p.str("assumeRolePolicy"), p.optional("path"), p.optional("permissionsBoundary")
	description, tags := p.optional("description"), p.tags()
	got, err := a.iam.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(name)})
	switch {
	case isAWSError[*iamtypes.NoSuchEntityException](err):
		var iamTags []iamtypes.Tag
		for _, k := range slices.Sorted(maps.Keys(tags)) {
			iamTags = append(iamTags, iamtypes.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
		}
		_, err = a.iam.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(name), Path: path, AssumeRolePolicyDocument: aws.String(trust),
			Description: description, PermissionsBoundary: boundary, Tags: iamTags})
	case err == nil:
		err = a.updateRole(ctx, name, got.Role, trust, description, boundary, tags)
	}
	if err != nil {
		return nil, err
	}
	if got, err = a.iam.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(name)}); err != nil {
		return nil, err
	}
	return map[string]any{"arn": aws.ToString(got.Role.Arn), "id": aws.ToString(got.Role.RoleName), "uniqueId": aws.ToString(got.Role.RoleId)}, nil
}

// updateRole makes an existing role's trust, description, boundary and tags what the spec says.
func (a *emulatedAWS) updateRole(ctx context.Context, name string, role *iamtypes.Role, trust string, description, boundary *string, tags map[string]string) error {
	if _, err := a.iam.UpdateAssumeRolePolicy(ctx, &iam.UpdateAssumeRolePolicyInput{RoleName: aws.String(name), PolicyDocument: aws.String(trust)}); err != nil {
		return err
	}
	if _, err := a.iam.UpdateRole(ctx, &iam.UpdateRoleInput{RoleName: aws.String(name), Description: description}); err != nil {
		return err
	}
	var err error
	switch {
	case boundary != nil:
		_, err = a.iam.PutRolePermissionsBoundary(ctx, &iam.PutRolePermissionsBoundaryInput{RoleName: aws.String(name), PermissionsBoundary: boundary})
	case role.PermissionsBoundary != nil:
		_, err = a.iam.DeleteRolePermissionsBoundary(ctx, &iam.DeleteRolePermissionsBoundaryInput{RoleName: aws.String(name)})
	}
	if err != nil {
		return err
	}
	var held []string
	for _, t := range role.Tags {
		held = append(held, aws.ToString(t.Key))
	}
	if drop := stale(held, tags); len(drop) > 0 {
		if _, err := a.iam.UntagRole(ctx, &iam.UntagRoleInput{RoleName: aws.String(name), TagKeys: drop}); err != nil {
			return err
		}
	}
	if len(tags) == 0 {
		return nil
	}
	var iamTags []iamtypes.Tag
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		iamTags = append(iamTags, iamtypes.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
	}
	_, err = a.iam.TagRole(ctx, &iam.TagRoleInput{RoleName: aws.String(name), Tags: iamTags})
	return err
}

func (a *emulatedAWS) applyRolePolicy(ctx context.Context, name string, p *forProvider, outOfBand map[string]any) (map[string]any, error) {
	role, doc := p.str("role"), p.str("policy")
	if outOfBand != nil {
		var d map[string]any
		if err := json.Unmarshal([]byte(doc), &d); err != nil {
			return nil, fmt.Errorf("cannot add a statement to the role policy: %w", err)
		}
		d["Statement"] = append(d["Statement"].([]any), outOfBand)
		b, _ := json.Marshal(d)
		doc = string(b)
	}
	if _, err := a.iam.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: aws.String(role), PolicyName: aws.String(name), PolicyDocument: aws.String(doc)}); err != nil {
		return nil, err
	}
	got, err := a.iam.GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: aws.String(role), PolicyName: aws.String(name)})
	if err != nil {
		return nil, err
	}
	// IAM answers the document URL-encoded (RFC 3986), and the SDK leaves it so.
	held, err := url.QueryUnescape(aws.ToString(got.PolicyDocument))
	if err != nil {
		return nil, err
	}
	return map[string]any{"id": role + ":" + name, "policy": held}, nil
}

// queueAttributes maps the Queue's forProvider fields the fake plays to SQS attributes.
var queueAttributes = map[string]sqstypes.QueueAttributeName{
	"messageRetentionSeconds":  sqstypes.QueueAttributeNameMessageRetentionPeriod,
	"sqsManagedSseEnabled":     sqstypes.QueueAttributeNameSqsManagedSseEnabled,
	"visibilityTimeoutSeconds": sqstypes.QueueAttributeNameVisibilityTimeout,
	"delaySeconds":             sqstypes.QueueAttributeNameDelaySeconds,
	"maxMessageSize":           sqstypes.QueueAttributeNameMaximumMessageSize,
	"receiveWaitTimeSeconds":   sqstypes.QueueAttributeNameReceiveMessageWaitTimeSeconds,
	"kmsMasterKeyId":           sqstypes.QueueAttributeNameKmsMasterKeyId,
}

func (a *emulatedAWS) applyQueue(ctx context.Context, p *forProvider) (map[string]any, error) {
	region, name := p.str("region"), p.str("name")
	attributes := map[string]string{}
	for field, attribute := range queueAttributes {
		p.read[field] = true
		switch v := p.fields[field].(type) {
		case nil:
		case string:
			attributes[string(attribute)] = v
		case bool:
			attributes[string(attribute)] = strconv.FormatBool(v)
		default:
			attributes[string(attribute)] = fmt.Sprint(v) // JSON numbers: int64 or float64
		}
	}
	tags := p.tags()
	url, err := a.queueURL(ctx, p)
	switch {
	case isAWSError[*sqstypes.QueueDoesNotExist](err):
		var out *sqs.CreateQueueOutput
		out, err = a.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attributes, Tags: tags}, sqsRegion(region))
		if err == nil {
			url = aws.ToString(out.QueueUrl)
		}
	case err == nil:
		err = a.updateQueue(ctx, region, url, attributes, tags)
	}
	if err != nil {
		return nil, err
	}
	got, err := a.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}}, sqsRegion(region))
	if err != nil {
		return nil, err
	}
	return map[string]any{"arn": got.Attributes[string(sqstypes.QueueAttributeNameQueueArn)], "url": url, "id": url}, nil
}

func (a *emulatedAWS) queueURL(ctx context.Context, p *forProvider) (string, error) {
	out, err := a.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(p.str("name"))}, sqsRegion(p.str("region")))
	if err != nil {
		return "", err
	}
	return aws.ToString(out.QueueUrl), nil
}

func (a *emulatedAWS) updateQueue(ctx context.Context, region, url string, attributes, tags map[string]string) error {
	if len(attributes) > 0 {
		if _, err := a.sqs.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(url), Attributes: attributes}, sqsRegion(region)); err != nil {
			return err
		}
	}
	held, err := a.sqs.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: aws.String(url)}, sqsRegion(region))
	if err != nil {
		return err
	}
	if drop := stale(slices.Collect(maps.Keys(held.Tags)), tags); len(drop) > 0 {
		if _, err := a.sqs.UntagQueue(ctx, &sqs.UntagQueueInput{QueueUrl: aws.String(url), TagKeys: drop}, sqsRegion(region)); err != nil {
			return err
		}
	}
	if len(tags) == 0 {
		return nil
	}
	_, err = a.sqs.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: aws.String(url), Tags: tags}, sqsRegion(region))
	return err
}

func (a *emulatedAWS) applyQueuePolicy(ctx context.Context, p *forProvider) (map[string]any, error) {
	region, url := p.str("region"), p.str("queueUrl")
	policy := string(sqstypes.QueueAttributeNamePolicy)
	if _, err := a.sqs.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: aws.String(url),
		Attributes: map[string]string{policy: p.str("policy")}}, sqsRegion(region)); err != nil {
		return nil, err
	}
	got, err := a.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNamePolicy}}, sqsRegion(region))
	if err != nil {
		return nil, err
	}
	return map[string]any{"id": url, "policy": got.Attributes[policy]}, nil
}

func (a *emulatedAWS) applyRule(ctx context.Context, name string, p *forProvider) (map[string]any, error) {
	region, bus := p.str("region"), p.str("eventBusName")
	tags := p.tags()
	out, err := a.events.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String(name), EventBusName: aws.String(bus),
		EventPattern: p.optional("eventPattern"), Description: p.optional("description")}, eventsRegion(region))
	if err != nil {
		return nil, err
	}
	arn := aws.ToString(out.RuleArn)
	held, err := a.events.ListTagsForResource(ctx, &eventbridge.ListTagsForResourceInput{ResourceARN: aws.String(arn)}, eventsRegion(region))
	if err != nil {
		return nil, err
	}
	var keys []string
	for _, t := range held.Tags {
		keys = append(keys, aws.ToString(t.Key))
	}
	if drop := stale(keys, tags); len(drop) > 0 {
		if _, err := a.events.UntagResource(ctx, &eventbridge.UntagResourceInput{ResourceARN: aws.String(arn), TagKeys: drop}, eventsRegion(region)); err != nil {
			return nil, err
		}
	}
	if len(tags) > 0 {
		var ebTags []ebtypes.Tag
		for _, k := range slices.Sorted(maps.Keys(tags)) {
			ebTags = append(ebTags, ebtypes.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
		}
		if _, err := a.events.TagResource(ctx, &eventbridge.TagResourceInput{ResourceARN: aws.String(arn), Tags: ebTags}, eventsRegion(region)); err != nil {
			return nil, err
		}
	}
	return map[string]any{"arn": arn, "id": bus + "/" + name}, nil
}

func (a *emulatedAWS) applyTarget(ctx context.Context, p *forProvider) (map[string]any, error) {
	rule, bus, id := p.str("rule"), p.str("eventBusName"), p.str("targetId")
	out, err := a.events.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String(rule), EventBusName: aws.String(bus),
		Targets: []ebtypes.Target{{Id: aws.String(id), Arn: aws.String(p.str("arn"))}}}, eventsRegion(p.str("region")))
	if err != nil {
		return nil, err
	}
	for _, f := range out.FailedEntries {
		return nil, fmt.Errorf("PutTargets failed for target %s: %s: %s", aws.ToString(f.TargetId), aws.ToString(f.ErrorCode), aws.ToString(f.ErrorMessage))
	}
	return map[string]any{"id": bus + "/" + rule + "/" + id}, nil
}

// observeCluster reads the existing EKS cluster an observe-only Cluster stands for, as
// DescribeCluster answers. moto 5.2.1 answers no vpcId (eks/models.py: resourcesVpcConfig is
// kept as CreateCluster was given it, and CreateCluster takes no VPC): vpcConfig.vpcId is the
// suite's stand-in, testVPC. vpcConfig is a list in the cluster-scoped v1beta1, an object in the
// namespaced one.
func (a *emulatedAWS) observeCluster(ctx context.Context, name string, p *forProvider, namespaced bool) (map[string]any, error) {
	out, err := a.eks.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(name)}, eksRegion(p.str("region")))
	if err != nil {
		return nil, err
	}
	vpc := map[string]any{"vpcId": testVPC}
	at := map[string]any{"arn": aws.ToString(out.Cluster.Arn), "id": aws.ToString(out.Cluster.Name), "version": aws.ToString(out.Cluster.Version),
		"vpcConfig": []any{vpc}}
	if namespaced {
		at["vpcConfig"] = vpc
	}
	return at, nil
}

// refusal is how provider-aws reports a call AWS refused (crossplane-runtime's managed
// reconciler: "create failed: …", "delete failed: …"), with the SDK's error, which carries AWS's
// error code and words.
func refusal(operation string, err error) string { return operation + " failed: " + err.Error() }

// TestAWSEmulated: what the fake provider-aws plays is made in AWS, the emulator. A role policy
// whose document IAM refuses (an Effect of "Maybe") and a rule whose event pattern EventBridge
// refuses (not JSON) fail with the emulator's words, Synced=False, while the role is created
// with the ARN and unique id the emulator assigned; fixed, both are made and report what the
// emulator holds; deleted (the role at once with its policy, which the emulator refuses until
// the policy is gone), all three are gone from the emulator too. The objects are made directly,
// labelled as an XR's would be, no function involved.
func TestAWSEmulated(t *testing.T) {
	timed(t)
	ctx := t.Context()
	xr := xrRef{name: "aws-emulated"}
	const region = "eu-west-3"
	managed := func(group, resource, kind, name string, forProvider map[string]any) (schema.GroupVersionResource, *unstructured.Unstructured) {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": group + "/v1beta1", "kind": kind,
			"metadata": map[string]any{"name": name, "labels": map[string]any{compositeLabel: xr.name},
				"annotations": map[string]any{externalNameAnno: name, resourceNameAnno: name}},
			"spec": map[string]any{"forProvider": forProvider},
		}}
		return gvr(group, "v1beta1", resource), u
	}
	roleRes, role := managed("iam.aws.upbound.io", "roles", "Role", "e2e-emulated",
		map[string]any{"assumeRolePolicy": trustedBy("pods.eks.amazonaws.com"), "path": "/e2e/"})
	policyRes, policy := managed("iam.aws.upbound.io", "rolepolicies", "RolePolicy", "e2e-emulated-policy", map[string]any{"role": "e2e-emulated",
		"policy": `{"Version":"2012-10-17","Statement":[{"Effect":"Maybe","Action":"sqs:SendMessage","Resource":"*"}]}`})
	ruleRes, rule := managed("cloudwatchevents.aws.upbound.io", "rules", "Rule", "e2e-emulated-rule",
		map[string]any{"region": region, "eventBusName": "default", "eventPattern": `{"source":["aws.ec2"]`})
	objects := map[schema.GroupVersionResource]*unstructured.Unstructured{roleRes: role, policyRes: policy, ruleRes: rule}
	for res, u := range objects {
		fake.set(xr, u.GetName(), want{state: ready})
		if _, err := cp.dyn.Resource(res).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// Should the test stop early: deleted, as the end of the test deletes them.
		t.Cleanup(func() { _ = cp.dyn.Resource(res).Delete(context.Background(), u.GetName(), metav1.DeleteOptions{}) })
	}
	get := func(res schema.GroupVersionResource, name string) *unstructured.Unstructured {
		u, err := cp.dyn.Resource(res).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return &unstructured.Unstructured{Object: map[string]any{}}
		}
		return u
	}
	synced := func(res schema.GroupVersionResource, name, status string, words ...string) {
		t.Helper()
		if err := waitFor(ctx, time.Minute, fmt.Sprintf("%s Synced=%s saying %q", name, status, words), func() (bool, error) {
			c := condition(get(res, name), "Synced")
			msg, _ := c["message"].(string)
			return c != nil && c["status"] == status && containsAll(msg, words...), nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	synced(policyRes, policy.GetName(), "False", "create failed: ", "MalformedPolicyDocument: Syntax errors in policy.")
	synced(ruleRes, rule.GetName(), "False", "create failed: ", "InvalidEventPatternException: Event pattern is not valid.")
	synced(roleRes, role.GetName(), "True")
	held, err := cp.aws.iam.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(role.GetName())})
	if err != nil {
		t.Fatal(err)
	}
	at, _, _ := unstructured.NestedMap(get(roleRes, role.GetName()).Object, "status", "atProvider")
	if want := map[string]any{"arn": "arn:aws:iam::111122223333:role/e2e/e2e-emulated", "id": "e2e-emulated", "uniqueId": aws.ToString(held.Role.RoleId)}; !reflect.DeepEqual(at, want) {
		t.Errorf("the role's atProvider: want %v, the emulator's, got %v", want, at)
	}

	// Fixed: both are made, and report what the emulator holds.
	fixes := map[schema.GroupVersionResource][]string{
		policyRes: {policy.GetName(), "policy", `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"sqs:SendMessage","Resource":"*"}]}`},
		ruleRes:   {rule.GetName(), "eventPattern", `{"source":["aws.ec2"]}`},
	}
	for res, fix := range fixes {
		u := get(res, fix[0])
		_ = unstructured.SetNestedField(u.Object, fix[2], "spec", "forProvider", fix[1])
		if _, err := cp.dyn.Resource(res).Update(ctx, u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		synced(res, fix[0], "True")
	}
	doc, err := cp.aws.iam.GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: aws.String(role.GetName()), PolicyName: aws.String(policy.GetName())})
	if err != nil {
		t.Fatal(err)
	}
	if got, _, _ := unstructured.NestedString(get(policyRes, policy.GetName()).Object, "status", "atProvider", "policy"); got != fixes[policyRes][2] {
		t.Errorf("the role policy's atProvider.policy: want the fixed document, got %q (IAM holds %q)", got, aws.ToString(doc.PolicyDocument))
	}
	described, err := cp.aws.events.DescribeRule(ctx, &eventbridge.DescribeRuleInput{Name: aws.String(rule.GetName())}, eventsRegion(region))
	if err != nil {
		t.Fatal(err)
	}
	if got, _, _ := unstructured.NestedString(get(ruleRes, rule.GetName()).Object, "status", "atProvider", "arn"); got != aws.ToString(described.Arn) ||
		aws.ToString(described.EventPattern) != fixes[ruleRes][2] {
		t.Errorf("the rule: atProvider.arn %q, pattern %q; EventBridge holds %q, %q", got, fixes[ruleRes][2], aws.ToString(described.Arn), aws.ToString(described.EventPattern))
	}

	for res, u := range objects {
		if err := cp.dyn.Resource(res).Delete(ctx, u.GetName(), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := waitFor(ctx, time.Minute, "the three objects gone", func() (bool, error) {
		for res, u := range objects {
			if _, err := cp.dyn.Resource(res).Get(ctx, u.GetName(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.aws.iam.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(role.GetName())}); !isAWSError[*iamtypes.NoSuchEntityException](err) {
		t.Errorf("the role is still in IAM once its object is gone: %v", err)
	}
	if _, err := cp.aws.events.DescribeRule(ctx, &eventbridge.DescribeRuleInput{Name: aws.String(rule.GetName())}, eventsRegion(region)); !isAWSError[*ebtypes.ResourceNotFoundException](err) {
		t.Errorf("the rule is still in EventBridge once its object is gone: %v", err)
	}
}
