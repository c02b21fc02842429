package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	fnv1 "github.com/crossplane/function-sdk-go/proto/v1"
	"github.com/crossplane/function-sdk-go/resource"
	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// readyAt walks a claim of version v (none when empty), with the
// platform's input changed by input, from nothing to every step Ready, and
// returns what is then observed.
func readyAt(t *testing.T, v string, input func(*requestBuilder) *requestBuilder) map[resource.Name]map[string]any {
	t.Helper()
	aws := fakeProviders{t: t, account: account}
	var observed map[resource.Name]map[string]any
	var version any = v
	if v == "" {
		version = nil
	}
	for range 16 {
		rsp := run(t, input(aRequest(t).withSpec("version", version)).observing(observed).build())
		if msg := fatal(rsp); msg != "" {
			t.Fatalf("walking to Ready at %s: %s", v, msg)
		}
		if rsp.GetDesired().GetComposite().GetReady() != fnv1.Ready_READY_FALSE && len(observed) == len(rsp.GetDesired().GetResources()) {
			return observed
		}
		observed = aws.observe(rsp, true)
	}
	t.Fatalf("the claim did not get Ready at %s in 16 rounds", v)
	return nil
}

// builtFor is the Karpenter version a Kustomization's Object carries.
func builtFor(t *testing.T, rsp *fnv1.RunFunctionResponse, name string) string {
	t.Helper()
	r, ok := rsp.GetDesired().GetResources()[name]
	if !ok {
		t.Fatalf("%s is not desired", name)
	}
	o := r.GetResource().AsMap()
	for _, k := range []string{"spec", "forProvider", "manifest", "spec", "postBuild", "substitute"} {
		o, _ = o[k].(map[string]any)
	}
	v, _ := o["KARPENTER_VERSION"].(string)
	return v
}

// rolePolicy is the controller policy step one desires.
func rolePolicy(t *testing.T, rsp *fnv1.RunFunctionResponse) string {
	t.Helper()
	p, _ := forProvider(rsp, "controller-role-policy", "policy").(string)
	if p == "" {
		t.Fatal("no controller-role-policy policy desired")
	}
	return p
}

// TestUpgrade walks a claim Ready at 1.14.1 to 1.15.0, round by round, and
// checks each round: when the policy changes, when the controller's chart
// and the node pools move, what the claim is told, and that nothing that
// exists is dropped.
func TestUpgrade(t *testing.T) {
	reboot := func(b *requestBuilder) *requestBuilder {
		return b.withInput("controller.featureGates", []any{"NodeRepair", "RebootForRepair"})
	}
	noGates := func(b *requestBuilder) *requestBuilder { return b }

	t.Run("SamePolicy", func(t *testing.T) {
		// With no gate on, 1.15.0's controller policy is 1.14.1's: the
		// controller may follow at once.
		aws := fakeProviders{t: t, account: account}
		observed := readyAt(t, "1.14.1", noGates)
		before := run(t, aRequest(t).withSpec("version", "1.14.1").observing(observed).build())
		call := func() *fnv1.RunFunctionResponse {
			rsp := run(t, aRequest(t).withSpec("version", "1.15.0").observing(observed).build())
			checkNothingDropped(t, observed, rsp)
			return rsp
		}

		rsp := call()
		checkRound(t, "the version changed", rsp, "1.15.0", "1.14.1",
			"1.14.1 → 1.15.0: Karpenter 1.15.0's controller policy is 1.14.1's, so the controller follows at once; waiting for controller-kustomization to be Ready at 1.15.0")
		if rolePolicy(t, rsp) != rolePolicy(t, before) {
			t.Error("the role policy changed, though both versions' policies are the same")
		}

		// The claimed cluster's Flux has not reconciled the new chart yet.
		observed = aws.observe(rsp, true)
		observed["controller-kustomization"] = kustomizationFailing(observed["controller-kustomization"], "HelmRelease/karpenter/karpenter status: 'Progressing'")
		rsp = call()
		checkRound(t, "the controller not Ready at 1.15.0 yet", rsp, "1.15.0", "1.14.1", "waiting for controller-kustomization to be Ready at 1.15.0")

		observed = aws.observe(rsp, true)
		rsp = call()
		checkRound(t, "the controller Ready at 1.15.0", rsp, "1.15.0", "1.15.0", "controller-kustomization is Ready at 1.15.0, so the node pools follow")

		observed = aws.observe(rsp, true)
		rsp = call()
		if c := conditionsOf(rsp)["VersionReady"]; c != (cond{fnv1.Status_STATUS_CONDITION_TRUE, "Current"}) {
			t.Errorf("everything at 1.15.0: VersionReady %v, want True/Current", c)
		}
		if rsp.GetDesired().GetComposite().GetReady() == fnv1.Ready_READY_FALSE {
			t.Error("everything at 1.15.0 and Ready: the XR is still held unready")
		}
	})

	t.Run("PolicyFirst", func(t *testing.T) {
		// RebootForRepair: 1.15.0 needs ec2:RebootInstances, which 1.14.1
		// does not know. The policy changes first; the controller waits
		// until AWS reports it applied.
		aws := fakeProviders{t: t, account: account}
		observed := readyAt(t, "1.14.1", reboot)
		before := run(t, reboot(aRequest(t).withSpec("version", "1.14.1")).observing(observed).build())
		if strings.Contains(rolePolicy(t, before), "ec2:RebootInstances") {
			t.Fatal("1.14.1's policy grants ec2:RebootInstances: the gate is 1.15's")
		}
		call := func() *fnv1.RunFunctionResponse {
			rsp := run(t, reboot(aRequest(t).withSpec("version", "1.15.0")).observing(observed).build())
			checkNothingDropped(t, observed, rsp)
			return rsp
		}

		rsp := call()
		waitingForPolicy := "1.14.1 → 1.15.0: waiting for AWS to report controller-role-policy applied with 1.15.0's policy; the controller stays at 1.14.1 until then"
		checkRound(t, "the version changed", rsp, "1.14.1", "1.14.1", waitingForPolicy)
		newPolicy := rolePolicy(t, rsp)
		if !strings.Contains(newPolicy, `"ec2:RebootInstances"`) {
			t.Errorf("the role policy was not updated first: %s", newPolicy)
		}
		if values := controllerValues(t, rsp); values["settings"].(map[string]any)["awsFeatureGates"] != nil {
			t.Errorf("the controller, still at 1.14.1, got 1.15's feature gate: %v", values["settings"])
		}

		// Crossplane applied the new document, but AWS still reports the
		// old one: the controller waits.
		stale := deepCopy(observed["controller-role-policy"])
		observed = aws.observe(rsp, true)
		applying := deepCopy(observed["controller-role-policy"])
		applying["status"] = stale["status"]
		observed["controller-role-policy"] = applying
		rsp = call()
		checkRound(t, "AWS still reports the old policy", rsp, "1.14.1", "1.14.1", waitingForPolicy)

		// AWS reports the new policy, but the role policy is not Ready.
		observed = aws.observe(rsp, true)
		observed["controller-role-policy"] = unready(observed["controller-role-policy"])
		rsp = call()
		checkRound(t, "the new policy reported, not Ready", rsp, "1.14.1", "1.14.1", waitingForPolicy)

		observed = aws.observe(rsp, true)
		rsp = call()
		checkRound(t, "the new policy applied", rsp, "1.15.0", "1.14.1",
			"1.14.1 → 1.15.0: AWS reports controller-role-policy applied with 1.15.0's policy, so the controller follows; waiting for controller-kustomization to be Ready at 1.15.0")
		if rolePolicy(t, rsp) != newPolicy {
			t.Error("the role policy changed again once applied")
		}
		gates, _ := controllerValues(t, rsp)["settings"].(map[string]any)["awsFeatureGates"].(map[string]any)
		if diff := cmp.Diff(map[string]any{"rebootForRepair": true}, gates); diff != "" {
			t.Errorf("the controller at 1.15.0 gets the platform's gate: settings.awsFeatureGates -want +got:\n%s", diff)
		}

		observed = aws.observe(rsp, true)
		rsp = call()
		checkRound(t, "the controller Ready at 1.15.0", rsp, "1.15.0", "1.15.0", "so the node pools follow")

		observed = aws.observe(rsp, true)
		if c := conditionsOf(call())["VersionReady"]; c != (cond{fnv1.Status_STATUS_CONDITION_TRUE, "Current"}) {
			t.Errorf("everything at 1.15.0: VersionReady %v, want True/Current", c)
		}
	})

	t.Run("DefaultLowered", func(t *testing.T) {
		// A claim naming no version got the platform's default (1.15.2,
		// aRequest's input); the platform then lowers it. The claim keeps what it runs: neither downgraded nor
		// refused for a version it never asked for.
		observed := readyAt(t, "", noGates)
		before := run(t, aRequest(t).withSpec("version", nil).observing(observed).build())
		lowered := func(b *requestBuilder) *requestBuilder { return b.withInput("versions.default", "1.14.1") }
		rsp := run(t, lowered(aRequest(t).withSpec("version", nil)).observing(observed).build())
		if msg := fatal(rsp); msg != "" {
			t.Fatalf("an unpinned claim refused when the default went down: %s", msg)
		}
		checkNothingDropped(t, observed, rsp)
		newest := "1.15.2"
		for _, n := range []string{"controller-kustomization", "nodes-kustomization"} {
			if v := builtFor(t, rsp, n); v != newest {
				t.Errorf("%s moved from %s to %s with the default", n, newest, v)
			}
		}
		if rolePolicy(t, rsp) != rolePolicy(t, before) {
			t.Error("the role policy changed with the default")
		}
		if c := conditionsOf(rsp)["VersionReady"]; c != (cond{fnv1.Status_STATUS_CONDITION_TRUE, "Current"}) {
			t.Errorf("VersionReady %v, want True/Current at %s", c, newest)
		}
		// A claim that names 1.15.0 is refused once the platform no longer
		// allows it: that is the platform's call, said at spec.version.
		pinned := run(t, aRequest(t).withSpec("version", "1.15.0").withInput("versions.allowed", []any{"1.14.1"}).withInput("versions.default", "1.14.1").observing(observed).build())
		if msg := fatal(pinned); !strings.Contains(msg, `spec.version: Unsupported value: "1.15.0"`) {
			t.Errorf("a pinned claim outside the allowed versions: fatal %q", msg)
		}
	})

	t.Run("DowngradeWithinMinor", func(t *testing.T) {
		// 1.15.2 → 1.15.0: the same CRDs (internal/versions, held by
		// test/flux against the zips) and the same policy, so the
		// controller goes back at once, then the pools, as an upgrade goes.
		observed := readyAt(t, "1.15.2", noGates)
		rsp := run(t, aRequest(t).withSpec("version", "1.15.0").observing(observed).build())
		if msg := fatal(rsp); msg != "" {
			t.Fatalf("a downgrade within 1.15: fatal %q", msg)
		}
		checkNothingDropped(t, observed, rsp)
		if got := builtFor(t, rsp, "controller-kustomization"); got != "1.15.0" {
			t.Errorf("the controller's chart is %s, want 1.15.0 at once (same policy)", got)
		}
		if got := builtFor(t, rsp, "nodes-kustomization"); got != "1.15.2" {
			t.Errorf("the node pools are built for %s, want 1.15.2 until the controller is Ready at 1.15.0", got)
		}
		if msg := conditionMessage(rsp, "VersionReady"); !strings.Contains(msg, "1.15.2 → 1.15.0") {
			t.Errorf("VersionReady says %q, want the move 1.15.2 → 1.15.0", msg)
		}
	})

	t.Run("Downgrade", func(t *testing.T) {
		observed := readyAt(t, "1.15.0", noGates)
		rsp := run(t, aRequest(t).withSpec("version", "1.14.1").observing(observed).build())
		msg := fatal(rsp)
		want := "spec.version: Forbidden: a downgrade from 1.15.0, which the controller was last built for, is refused"
		if !strings.Contains(msg, want) {
			t.Errorf("a downgrade: fatal %q, want it to say %q", msg, want)
		}
		checkRefusalShown(t, rsp, "Refused", msg)
		if n := len(rsp.GetDesired().GetResources()); n != 0 {
			t.Errorf("a refused downgrade composes %d resources, want none: Crossplane keeps what exists", n)
		}
	})
}

// checkRound checks one round of an upgrade: the versions the controller's
// and the node pools' Kustomizations carry, and the VersionReady condition.
func checkRound(t *testing.T, where string, rsp *fnv1.RunFunctionResponse, controller, nodes, says string) {
	t.Helper()
	if msg := fatal(rsp); msg != "" {
		t.Fatalf("%s: fatal: %s", where, msg)
	}
	if got := builtFor(t, rsp, "controller-kustomization"); got != controller {
		t.Errorf("%s: the controller's chart is %s, want %s", where, got, controller)
	}
	if got := builtFor(t, rsp, "nodes-kustomization"); got != nodes {
		t.Errorf("%s: the node pools are built for %s, want %s", where, got, nodes)
	}
	var version *fnv1.Condition
	for _, c := range rsp.GetConditions() {
		if c.GetType() == "VersionReady" {
			version = c
		}
	}
	if version.GetStatus() != fnv1.Status_STATUS_CONDITION_FALSE || version.GetReason() != "Upgrading" || !strings.Contains(version.GetMessage(), says) {
		t.Errorf("%s: VersionReady %v %s %q, want False/Upgrading saying %q", where, version.GetStatus(), version.GetReason(), version.GetMessage(), says)
	}
	if rsp.GetDesired().GetComposite().GetReady() != fnv1.Ready_READY_FALSE {
		t.Errorf("%s: the XR is not held unready during the upgrade", where)
	}
}

// checkNothingDropped: every resource that exists is still desired.
func checkNothingDropped(t *testing.T, observed map[resource.Name]map[string]any, rsp *fnv1.RunFunctionResponse) {
	t.Helper()
	for n := range observed {
		if _, ok := rsp.GetDesired().GetResources()[string(n)]; !ok {
			t.Errorf("%s exists but is no longer desired: Crossplane would delete it", n)
		}
	}
}

// controllerValues are the chart values the controller's Kustomization
// patches in.
func controllerValues(t *testing.T, rsp *fnv1.RunFunctionResponse) map[string]any {
	t.Helper()
	o := rsp.GetDesired().GetResources()["controller-kustomization"].GetResource().AsMap()
	for _, k := range []string{"spec", "forProvider", "manifest", "spec"} {
		o, _ = o[k].(map[string]any)
	}
	// The values patch is the one with a target (the other, internal/flux's helmReleaseMustExist,
	// is the HelmRelease's identity alone).
	patches, _ := o["patches"].([]any)
	var targeted []map[string]any
	for _, p := range patches {
		if p, _ := p.(map[string]any); p["target"] != nil {
			targeted = append(targeted, p)
		}
	}
	if len(patches) != 2 || len(targeted) != 1 {
		t.Fatalf("controller Kustomization patches %v, want the values patch and the HelmRelease's identity", patches)
	}
	var ops []struct {
		Value map[string]any `json:"value"`
	}
	if err := yamlUnmarshal(targeted[0]["patch"].(string), &ops); err != nil || len(ops) != 1 {
		t.Fatalf("cannot read the values patch: %v", err)
	}
	return ops[0].Value
}

func yamlUnmarshal(s string, into any) error { return yaml.Unmarshal([]byte(s), into) }

// grants tells whether a policy document grants action, read as parsed
// JSON.
func grants(t *testing.T, doc, action string) bool {
	t.Helper()
	var d struct {
		Statement []struct {
			Action []string `json:"Action"`
		} `json:"Statement"`
	}
	if err := yamlUnmarshal(doc, &d); err != nil {
		t.Fatalf("the role policy is not JSON: %v", err)
	}
	for _, s := range d.Statement {
		for _, a := range s.Action {
			if a == action {
				return true
			}
		}
	}
	return false
}

// rebootGate is the chart value RebootForRepair sets on the controller, nil
// when unset.
func rebootGate(t *testing.T, rsp *fnv1.RunFunctionResponse) any {
	t.Helper()
	gates, _ := controllerValues(t, rsp)["settings"].(map[string]any)["awsFeatureGates"].(map[string]any)
	return gates["rebootForRepair"]
}

// behind makes the claimed cluster's copy of an observed Object's object
// lag: what it held before (Flux has not reconciled the change yet).
func behind(now, before map[string]any) map[string]any {
	now = deepCopy(now)
	now["status"].(map[string]any)["atProvider"] = deepCopy(before["status"].(map[string]any)["atProvider"].(map[string]any))
	return now
}

// TestPermissionsLead changes only the platform's feature gates of a claim
// Ready at 1.15.0: a gate that needs a permission reaches the controller
// only once AWS reports the permission granted; a gate turned off leaves
// the controller first, and its permission goes once the claimed cluster
// runs the controller without it.
func TestPermissionsLead(t *testing.T) {
	const reboot = "ec2:RebootInstances"
	on := func(b *requestBuilder) *requestBuilder {
		return b.withInput("controller.featureGates", []any{"NodeRepair", "RebootForRepair"})
	}
	off := func(b *requestBuilder) *requestBuilder { return b }
	policyWait := "AWS reports a policy that lacks statements the controller is to get"

	t.Run("GateOn", func(t *testing.T) {
		aws := fakeProviders{t: t, account: account}
		observed := readyAt(t, "1.15.0", off)
		callWith := func(observed map[resource.Name]map[string]any) *fnv1.RunFunctionResponse {
			rsp := run(t, on(aRequest(t).withSpec("version", "1.15.0")).observing(observed).build())
			if msg := fatal(rsp); msg != "" {
				t.Fatalf("fatal: %s", msg)
			}
			checkNothingDropped(t, observed, rsp)
			return rsp
		}
		call := func() *fnv1.RunFunctionResponse { return callWith(observed) }
		rsp := call()
		if !grants(t, rolePolicy(t, rsp), reboot) {
			t.Fatalf("the role policy does not get %s first", reboot)
		}
		if g := rebootGate(t, rsp); g != nil {
			t.Errorf("the controller got rebootForRepair=%v before AWS reported %s granted", g, reboot)
		}

		// Crossplane applied the document; AWS still reports the old one.
		stale := deepCopy(observed["controller-role-policy"])
		observed = aws.observe(rsp, true)
		observed["controller-role-policy"]["status"] = stale["status"]
		rsp = call()
		if g := rebootGate(t, rsp); g != nil {
			t.Errorf("AWS reports the old policy: the controller got rebootForRepair=%v", g)
		}
		if msg := conditionMessage(rsp, "IdentityAndQueueReady"); !strings.Contains(msg, policyWait) {
			t.Errorf("IdentityAndQueueReady %q, want it to say %q", msg, policyWait)
		}
		if rsp.GetDesired().GetComposite().GetReady() != fnv1.Ready_READY_FALSE {
			t.Error("the XR is Ready while the controller waits for its permissions")
		}

		// AWS refuses the new document: the claim says so in AWS's words.
		refused := deepCopy(observed["controller-role-policy"])
		refused["status"].(map[string]any)["conditions"] = []any{
			map[string]any{"type": "Ready", "status": "True", "reason": "Available"},
			map[string]any{"type": "Synced", "status": "False", "reason": "ReconcileError", "message": "LimitExceeded: Maximum policy size of 10240 bytes exceeded"},
		}
		rsp = callWith(withObserved(observed, "controller-role-policy", refused))
		if msg := conditionMessage(rsp, "IdentityAndQueueReady"); !strings.Contains(msg, "LimitExceeded: Maximum policy size") {
			t.Errorf("AWS refuses the new policy: IdentityAndQueueReady %q does not carry its error", msg)
		}

		observed = aws.observe(rsp, true)
		rsp = call()
		if g := rebootGate(t, rsp); g != true {
			t.Errorf("AWS reports %s granted: rebootForRepair %v, want true", reboot, g)
		}
		if c := conditionsOf(rsp)["IdentityAndQueueReady"]; c.Status != fnv1.Status_STATUS_CONDITION_TRUE {
			t.Errorf("the new policy applied: IdentityAndQueueReady %v", c)
		}
	})

	t.Run("GateOff", func(t *testing.T) {
		aws := fakeProviders{t: t, account: account}
		observed := readyAt(t, "1.15.0", on)
		call := func() *fnv1.RunFunctionResponse {
			rsp := run(t, off(aRequest(t).withSpec("version", "1.15.0")).observing(observed).build())
			if msg := fatal(rsp); msg != "" {
				t.Fatalf("fatal: %s", msg)
			}
			checkNothingDropped(t, observed, rsp)
			return rsp
		}
		rsp := call()
		if g := rebootGate(t, rsp); g != nil {
			t.Errorf("the gate is off: the controller still gets rebootForRepair=%v", g)
		}
		if !grants(t, rolePolicy(t, rsp), reboot) {
			t.Errorf("%s was taken from the role while the controller still runs with the gate", reboot)
		}

		// provider-kubernetes applied the Object; the claimed cluster's
		// Flux has not reconciled it.
		before := observed["controller-kustomization"]
		observed = aws.observe(rsp, true)
		observed["controller-kustomization"] = behind(observed["controller-kustomization"], before)
		rsp = call()
		if !grants(t, rolePolicy(t, rsp), reboot) {
			t.Errorf("%s was taken from the role before the claimed cluster ran the controller without the gate", reboot)
		}
		if rsp.GetDesired().GetComposite().GetReady() != fnv1.Ready_READY_FALSE {
			t.Error("the XR is Ready while the claimed cluster still runs the old controller")
		}

		observed = aws.observe(rsp, true)
		rsp = call()
		if grants(t, rolePolicy(t, rsp), reboot) {
			t.Errorf("the controller runs without the gate: %s is still granted", reboot)
		}
		observed = aws.observe(rsp, true)
		rsp = call()
		if rsp.GetDesired().GetComposite().GetReady() == fnv1.Ready_READY_FALSE {
			t.Errorf("settled without the gate, the XR is not Ready: %v", conditionsOf(rsp))
		}
	})

	t.Run("KeptStatementsTooLarge", func(t *testing.T) {
		// AWS holds a statement the new policy drops, and the claimed
		// cluster's Flux has not yet reconciled the controller's latest
		// generation. A small statement is kept meanwhile; one so large
		// that both together exceed IAM's inline policy limit is not: the
		// new policy goes at once rather than a document IAM refuses, on
		// which the claim would wait for ever.
		settled, want, ctrl, plus := settledPolicy(t, off)
		holding := func(instances int) *fnv1.RunFunctionResponse {
			var resources []any
			for i := range instances {
				resources = append(resources, fmt.Sprintf("arn:aws:ec2:eu-west-3:111122223333:instance/i-%017d", i))
			}
			held := plus(map[string]any{"Effect": "Allow", "Action": []any{"ec2:RebootInstances"}, "Resource": resources})
			// The function wrote it, and AWS reports it.
			rp := deepCopy(settled["controller-role-policy"])
			rp["spec"].(map[string]any)["forProvider"].(map[string]any)["policy"] = held
			rp["status"].(map[string]any)["atProvider"].(map[string]any)["policy"] = held
			observed := withObserved(withObserved(settled, "controller-role-policy", rp), "controller-kustomization", ctrl)
			return run(t, aRequest(t).withSpec("version", "1.15.0").observing(observed).build())
		}
		if got := rolePolicy(t, holding(1)); !grants(t, got, reboot) {
			t.Errorf("a small dropped statement is not kept while the controller moves: %s", got)
		}
		if got := rolePolicy(t, holding(200)); got != want {
			t.Errorf("the kept statements would exceed the limit, yet the role policy is not the new one (%d characters)", len(got))
		}
	})

	t.Run("HandAddedStatementDropped", func(t *testing.T) {
		// Someone added "Action": "*" to the role policy in the console,
		// while the claimed cluster's Flux has not yet reconciled the
		// controller's latest generation: AWS reports the statement, the
		// function never wrote it, and the next document it writes has it
		// not. Nothing but the statement differs from the settled claim.
		settled, want, ctrl, plus := settledPolicy(t, off)
		rp := deepCopy(settled["controller-role-policy"])
		rp["status"].(map[string]any)["atProvider"].(map[string]any)["policy"] = plus(map[string]any{"Sid": "Console", "Effect": "Allow", "Action": "*", "Resource": "*"})
		for name, observed := range map[string]map[resource.Name]map[string]any{
			"controller settled":       withObserved(settled, "controller-role-policy", rp),
			"controller not at target": withObserved(withObserved(settled, "controller-role-policy", rp), "controller-kustomization", ctrl),
		} {
			got := rolePolicy(t, run(t, aRequest(t).withSpec("version", "1.15.0").observing(observed).build()))
			if got != want {
				t.Errorf("%s: AWS reports a statement the function never wrote, and the role policy keeps it:\n%s", name, got)
			}
		}
	})
}

// settledPolicy is a claim settled at 1.15.0 with the gates opts sets: what
// is observed, the role policy the function writes for it, its controller's
// Object as the claimed cluster's Flux reports it before it reconciled the
// latest generation, and plus, which is the policy with one more statement.
func settledPolicy(t *testing.T, opts func(*requestBuilder) *requestBuilder) (
	settled map[resource.Name]map[string]any, want string, ctrlBehind map[string]any, plus func(statement map[string]any) string,
) {
	t.Helper()
	settled = readyAt(t, "1.15.0", opts)
	want = rolePolicy(t, run(t, opts(aRequest(t).withSpec("version", "1.15.0")).observing(settled).build()))
	var doc map[string]any
	if err := yamlUnmarshal(want, &doc); err != nil {
		t.Fatal(err)
	}
	ctrlBehind = deepCopy(settled["controller-kustomization"])
	ctrlBehind["status"].(map[string]any)["atProvider"].(map[string]any)["manifest"].(map[string]any)["metadata"].(map[string]any)["generation"] = int64(2)
	plus = func(statement map[string]any) string {
		b, _ := json.Marshal(map[string]any{"Version": doc["Version"], "Statement": append(append([]any{}, doc["Statement"].([]any)...), statement)})
		return string(b)
	}
	return settled, want, ctrlBehind, plus
}

// TestUpgradeBeforeNodesExist: a claim whose node pools were never
// composed is upgraded. They are created only once the claimed cluster runs
// the controller at the new version, and then for it.
func TestUpgradeBeforeNodesExist(t *testing.T) {
	aws := fakeProviders{t: t, account: account}
	observed := readyAt(t, "1.14.1", func(b *requestBuilder) *requestBuilder { return b })
	delete(observed, "nodes-kustomization")
	call := func() *fnv1.RunFunctionResponse {
		rsp := run(t, aRequest(t).withSpec("version", "1.15.0").observing(observed).build())
		if msg := fatal(rsp); msg != "" {
			t.Fatalf("fatal: %s", msg)
		}
		checkNothingDropped(t, observed, rsp)
		return rsp
	}
	rsp := call()
	if v := builtFor(t, rsp, "controller-kustomization"); v != "1.15.0" {
		t.Fatalf("the controller's chart is %s, want 1.15.0", v)
	}
	if _, ok := rsp.GetDesired().GetResources()["nodes-kustomization"]; ok {
		t.Error("the node pools are composed before the claimed cluster runs the controller at 1.15.0")
	}

	// The controller's Object is Ready, for the chart the claimed cluster
	// still runs.
	before := observed["controller-kustomization"]
	observed = aws.observe(rsp, true)
	observed["controller-kustomization"] = behind(observed["controller-kustomization"], before)
	rsp = call()
	if _, ok := rsp.GetDesired().GetResources()["nodes-kustomization"]; ok {
		t.Error("the node pools are composed while the claimed cluster still runs the controller at 1.14.1")
	}
	if msg := conditionMessage(rsp, "ControllerReady"); !strings.Contains(msg, "does not hold the change yet") {
		t.Errorf("ControllerReady %q, want it to say the claimed cluster has not taken the change", msg)
	}

	// The claimed cluster refuses the change: provider-kubernetes reports why as Synced=False
	// (crossplane-runtime v2.4.0 pkg/reconciler/managed/reconciler.go, errReconcileUpdate;
	// provider-kubernetes v1.3.1 internal/controller/cluster/object/object.go, errApplyObject;
	// an admission webhook's denial as the API server words it, k8s.io/apiserver v0.35.4
	// pkg/admission/plugin/webhook/errors/statuserror.go, ToStatusErr; the webhook's name and
	// its reason are made up), the Object still Ready for the object as it was. The claim carries
	// it word for word.
	refused := `update failed: cannot apply object: admission webhook "policy.platform.example" denied the request: ` +
		"Kustomizations in flux-system are frozen"
	observed = aws.observe(rsp, true)
	observed["controller-kustomization"] = behind(observed["controller-kustomization"], before)
	observed["controller-kustomization"]["status"].(map[string]any)["conditions"] = []any{
		map[string]any{"type": "Ready", "status": "True", "reason": "Available"},
		map[string]any{"type": "Synced", "status": "False", "reason": "ReconcileError", "message": refused},
	}
	rsp = call()
	if msg := conditionMessage(rsp, "ControllerReady"); !strings.Contains(msg, "Synced=False (ReconcileError): "+refused) {
		t.Errorf("ControllerReady %q, want provider-kubernetes' refusal word for word", msg)
	}

	// Flux took the new spec, but reports the generation before.
	observed = aws.observe(rsp, true)
	manifest := observed["controller-kustomization"]["status"].(map[string]any)["atProvider"].(map[string]any)["manifest"].(map[string]any)
	manifest["metadata"].(map[string]any)["generation"] = int64(2)
	rsp = call()
	if _, ok := rsp.GetDesired().GetResources()["nodes-kustomization"]; ok {
		t.Error("the node pools are composed while Flux has not reconciled the controller's generation")
	}

	observed = aws.observe(rsp, true)
	rsp = call()
	if v := builtFor(t, rsp, "nodes-kustomization"); v != "1.15.0" {
		t.Errorf("the node pools are built for %s, want 1.15.0", v)
	}
}

// TestMonitoringOff: the platform turns monitoring off. Its Kustomization
// is no longer composed (the claimed cluster's Flux removes the rules and
// dashboards), MonitoringReady goes, and everything else stays.
func TestMonitoringOff(t *testing.T) {
	observed := readyAt(t, "1.15.0", func(b *requestBuilder) *requestBuilder { return b })
	if _, ok := observed["monitoring-kustomization"]; !ok {
		t.Fatal("monitoring is on by default, yet not composed")
	}
	rsp := run(t, aRequest(t).withSpec("version", "1.15.0").withInput("monitoring.enabled", false).observing(observed).build())
	if msg := fatal(rsp); msg != "" {
		t.Fatal(msg)
	}
	for n := range observed {
		_, desired := rsp.GetDesired().GetResources()[string(n)]
		if desired == (n == "monitoring-kustomization") {
			t.Errorf("monitoring off: %s desired %v", n, desired)
		}
	}
	if _, ok := conditionsOf(rsp)["MonitoringReady"]; ok {
		t.Error("monitoring off, yet MonitoringReady is reported")
	}
	if rsp.GetDesired().GetComposite().GetReady() == fnv1.Ready_READY_FALSE {
		t.Errorf("monitoring off holds the XR unready: %v", conditionsOf(rsp))
	}
}
