package main

import (
	"fmt"
	"strings"
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"

	"github.com/do-now/function-karpenter/internal/cluster"
)

// fakeProviders play provider-aws: they turn what the function desired into
// what Crossplane would observe once AWS created it, with the identifiers AWS
// assigns written into status.atProvider.
type fakeProviders struct {
	t       testing.TB
	account string
}

// observe returns every desired resource of rsp as observed, Ready or not.
func (p fakeProviders) observe(rsp *fnv1.RunFunctionResponse, ready bool) map[resource.Name]map[string]any {
	p.t.Helper()
	out := map[resource.Name]map[string]any{}
	for name, r := range rsp.GetDesired().GetResources() {
		out[resource.Name(name)] = p.created(r.GetResource().AsMap(), ready)
	}
	return out
}

// firstStep is what exists once b's XR holds its cluster and its first
// step was created (Ready or not): its lease, then step one, then step
// one's controller policy, which waits for the observed cluster's VPC.
func (p fakeProviders) firstStep(b *requestBuilder, ready bool) map[resource.Name]map[string]any {
	p.t.Helper()
	lease := p.observe(run(p.t, b.build()), true)
	first := p.observe(run(p.t, b.observing(lease).build()), true)
	return p.observe(run(p.t, b.observing(first).build()), ready)
}

// created is one resource after its controller created it: provider-aws
// for managed resources, provider-kubernetes for the Objects, with what the
// claimed cluster (its Kubernetes, its Flux) reports of their manifests.
func (p fakeProviders) created(desired map[string]any, ready bool) map[string]any {
	obj := deepCopy(desired)
	switch obj["kind"] {
	case "Usage", "ClusterUsage":
		obj["status"] = map[string]any{"conditions": conditions(true, "", "")}
		return obj
	case "Object":
		// provider-kubernetes: the manifest as the claimed cluster returns
		// it, status included, and Ready as the Object's readiness policy
		// derives it.
		manifest := deepCopy(obj["spec"].(map[string]any)["forProvider"].(map[string]any)["manifest"].(map[string]any))
		switch manifest["kind"] {
		case "Namespace":
			manifest["status"] = map[string]any{"phase": "Active"}
		case "Pod":
			manifest["status"] = map[string]any{"phase": "Running"}
			if ready {
				manifest["status"] = map[string]any{"phase": "Succeeded", "containerStatuses": []any{map[string]any{
					"name": "aws", "state": map[string]any{"terminated": map[string]any{"exitCode": 0, "reason": "Completed"}},
				}}}
			}
		case "Deployment":
			// The final check's: its kubelet runs its one Pod.
			manifest["status"] = map[string]any{"replicas": 1}
			if ready {
				manifest["status"] = map[string]any{"replicas": 1, "readyReplicas": 1, "availableReplicas": 1}
			}
		case "EC2NodeClass":
			// Observed only: the class as Karpenter validated it.
			manifest["status"] = map[string]any{"conditions": []any{
				map[string]any{"type": "ValidationSucceeded", "status": "True", "reason": "ValidationSucceeded"},
				map[string]any{"type": "Ready", "status": "True", "reason": "Ready"},
			}}
		case "NodePool":
			// Observed only: the pool as Karpenter reports it, its
			// limits those the nodes Kustomization gave it.
			manifest["spec"] = map[string]any{"limits": map[string]any{"cpu": "100", "memory": "400Gi"}}
			manifest["status"] = map[string]any{"nodes": 2, "resources": map[string]any{"cpu": "8", "memory": "32Gi", "pods": "220"}}
		case "Kustomization":
			// The API server counts generations; Flux reports the one it
			// reconciled, and stamps each condition with the generation it
			// was marked at (fluxcd/pkg/runtime conditions.Set).
			manifest["metadata"].(map[string]any)["generation"] = int64(1)
			conds := fluxConditions(ready, "Progressing", "Reconciliation in progress")
			for _, c := range conds {
				c.(map[string]any)["observedGeneration"] = int64(1)
			}
			manifest["status"] = map[string]any{"conditions": conds}
			if ready {
				manifest["status"].(map[string]any)["observedGeneration"] = int64(1)
			}
		}
		obj["status"] = map[string]any{"atProvider": map[string]any{"manifest": manifest}, "conditions": conditions(ready, "", "")}
		return obj
	}
	fp := obj["spec"].(map[string]any)["forProvider"].(map[string]any)
	str := func(k string) string { s, _ := fp[k].(string); return s }
	ext := ""
	if md, ok := obj["metadata"].(map[string]any); ok {
		if a, ok := md["annotations"].(map[string]any); ok {
			ext, _ = a["crossplane.io/external-name"].(string)
		}
	}
	at := map[string]any{}
	switch obj["kind"] {
	case "Role":
		at["arn"] = fmt.Sprintf("arn:aws:iam::%s:role%s%s", p.account, str("path"), ext)
	case "Queue":
		at["arn"] = fmt.Sprintf("arn:aws:sqs:%s:%s:%s", str("region"), p.account, str("name"))
		at["url"] = fmt.Sprintf("https://sqs.%s.amazonaws.com/%s/%s", str("region"), p.account, str("name"))
	case "RolePolicy":
		// What AWS reports of the policy it holds: the document it was
		// given, once created.
		at["policy"] = str("policy")
	case "Rule":
		at["arn"] = fmt.Sprintf("arn:aws:events:%s:%s:rule/%s", str("region"), p.account, ext)
	case "PodIdentityAssociation":
		at["associationArn"] = fmt.Sprintf("arn:aws:eks:%s:%s:podidentityassociation/%s/a-0123456789", str("region"), p.account, str("clusterName"))
	case "Cluster":
		// The existing cluster the observe-only Cluster finds, as
		// provider-aws writes it: vpcConfig a list in the claim API's
		// v1beta1, an object in the namespaced one's.
		at["arn"] = fmt.Sprintf("arn:aws:eks:%s:%s:cluster/%s", str("region"), p.account, ext)
		at["version"] = clusterVersion
		vpc := map[string]any{"vpcId": "vpc-0fa4e", "clusterSecurityGroupId": "sg-0c1u5"}
		at["vpcConfig"] = []any{vpc}
		if apiVersion, _ := obj["apiVersion"].(string); strings.Contains(apiVersion, ".m.") {
			at["vpcConfig"] = vpc
		}
	}
	obj["status"] = map[string]any{"atProvider": at, "conditions": conditions(ready, "", "")}
	return obj
}

// failedCheck marks the access check's Pod an observed Object carries as
// failed at check, the way the kubelet reports it: the script's exit code
// and its termination message, the check's name and AWS's words. The Object
// stays unready, as its CEL query says.
func failedCheck(obj map[string]any, check cluster.Check, aws string) map[string]any {
	obj = unready(obj)
	manifest := obj["status"].(map[string]any)["atProvider"].(map[string]any)["manifest"].(map[string]any)
	manifest["status"] = map[string]any{"phase": "Failed", "containerStatuses": []any{map[string]any{
		"name": "aws", "state": map[string]any{"terminated": map[string]any{
			"exitCode": check.ExitCode, "reason": "Error", "message": check.Name + ": " + aws + "\n",
		}},
	}}}
	return obj
}

// kustomizationFailing marks the Kustomization an observed Object carries
// as the claimed cluster's Flux reports a failed health check; the Object,
// which derives its readiness from the Kustomization's, turns unready.
func kustomizationFailing(obj map[string]any, message string) map[string]any {
	obj = unready(obj)
	manifest := obj["status"].(map[string]any)["atProvider"].(map[string]any)["manifest"].(map[string]any)
	manifest["status"] = map[string]any{"conditions": fluxConditions(false, "HealthCheckFailed", message)}
	return obj
}

func fluxConditions(ready bool, reason, message string) []any {
	if ready {
		return []any{map[string]any{"type": "Ready", "status": "True", "reason": "ReconciliationSucceeded", "message": "Applied revision: main@sha1:0123abc"}}
	}
	return []any{map[string]any{"type": "Ready", "status": "False", "reason": reason, "message": message}}
}

// failing marks an observed resource as refused by AWS.
func failing(obj map[string]any, message string) map[string]any {
	obj = deepCopy(obj)
	obj["status"].(map[string]any)["conditions"] = conditions(false, "ReconcileError", message)
	return obj
}

// unready marks an observed resource as no longer Ready.
func unready(obj map[string]any) map[string]any {
	obj = deepCopy(obj)
	obj["status"].(map[string]any)["conditions"] = conditions(false, "", "")
	return obj
}

func conditions(ready bool, syncReason, syncMessage string) []any {
	if ready {
		return []any{
			map[string]any{"type": "Ready", "status": "True", "reason": "Available"},
			map[string]any{"type": "Synced", "status": "True", "reason": "ReconcileSuccess"},
		}
	}
	synced := map[string]any{"type": "Synced", "status": "True", "reason": "ReconcileSuccess"}
	if syncMessage != "" {
		synced = map[string]any{"type": "Synced", "status": "False", "reason": syncReason, "message": syncMessage}
	}
	return []any{map[string]any{"type": "Ready", "status": "False", "reason": "Creating"}, synced}
}
