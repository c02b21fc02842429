//go:build render

package render

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestValidateCatchesMistakes proves the schemas TestRenderEveryStep validates
// against bite: each object is a valid one with one deliberate mistake, and
// validate must report that mistake. The valid counterparts must pass, so a
// report cannot come from something else in the object.
func TestValidateCatchesMistakes(t *testing.T) {
	root, tmp := repoRoot(t), t.TempDir()
	extensions := extensionsDir(t, root, tmp)

	const pod = `apiVersion: v1
kind: Pod
metadata:
  name: check
  namespace: karpenter
spec:
  activeDeadlineSeconds: 600
  restartPolicy: Never
  serviceAccountName: karpenter
  containers:
  - name: aws
    image: public.ecr.aws/aws-cli/aws-cli:2.31.30
    resources:
      requests:
        cpu: 100m
        memory: 64Mi
    ports:
    - containerPort: 8080
`
	const namespace = `apiVersion: v1
kind: Namespace
metadata:
  name: karpenter
`
	const serviceAccount = `apiVersion: v1
kind: ServiceAccount
metadata:
  name: karpenter
  namespace: karpenter
automountServiceAccountToken: true
`
	const kustomization = `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: karpenter
  namespace: flux-system
spec:
  interval: 10m
  path: ./karpenter
  prune: true
  sourceRef:
    kind: GitRepository
    name: platform
`
	cases := []struct {
		name   string
		object string
		want   string // in the report; empty: the object is valid
	}{
		{name: "valid Pod", object: pod},
		{name: "valid Namespace", object: namespace},
		{name: "valid ServiceAccount", object: serviceAccount},
		{name: "valid Kustomization", object: kustomization},
		{
			name:   "Pod with an unknown field in its spec",
			object: strings.Replace(pod, "  restartPolicy: Never\n", "  restartPolicy: Never\n  restartPolicyy: Never\n", 1),
			want:   `spec.restartPolicyy: Invalid value: "restartPolicyy": unknown field: "restartPolicyy"`,
		},
		{
			name:   "Pod with an unknown field in a container port",
			object: strings.Replace(pod, "    - containerPort: 8080\n", "    - containerPort: 8080\n      hostname: x\n", 1),
			want:   `spec.containers[0].ports[0].hostname: Invalid value: "hostname": unknown field: "hostname"`,
		},
		{
			name:   "Pod with a string activeDeadlineSeconds",
			object: strings.Replace(pod, "activeDeadlineSeconds: 600", `activeDeadlineSeconds: "600"`, 1),
			want:   `spec.activeDeadlineSeconds in body must be of type integer: "string"`,
		},
		{
			name:   "Pod with a malformed quantity",
			object: strings.Replace(pod, "memory: 64Mi", "memory: 64 MB", 1),
			want:   `spec.containers[0].resources.requests.memory: Invalid value: "64 MB"`,
		},
		{
			name:   "Pod without containers",
			object: pod[:strings.Index(pod, "  containers:\n")],
			want:   `spec.containers: Required value`,
		},
		{
			name:   "Namespace with spec.bogus",
			object: namespace + "spec:\n  bogus: true\n",
			want:   `spec.bogus: Invalid value: "bogus": unknown field: "bogus"`,
		},
		{
			name:   "ServiceAccount with a string automountServiceAccountToken",
			object: strings.Replace(serviceAccount, "automountServiceAccountToken: true", `automountServiceAccountToken: "true"`, 1),
			want:   `automountServiceAccountToken in body must be of type boolean: "string"`,
		},
		{
			name:   `Kustomization with spec.prune: "yes"`,
			object: strings.Replace(kustomization, "prune: true", `prune: "yes"`, 1),
			want:   `spec.prune in body must be of type boolean: "string"`,
		},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			objects := filepath.Join(tmp, fmt.Sprintf("object-%d.yaml", i))
			if err := os.WriteFile(objects, []byte(c.object), 0o644); err != nil {
				t.Fatal(err)
			}
			out, ok := validate(t, extensions, objects)
			if c.want == "" {
				if !ok || !strings.Contains(out, "1 success cases") {
					t.Errorf("want the object valid, crossplane beta validate:\n%s", out)
				}
				return
			}
			if ok || !strings.Contains(out, " 0 missing schemas, 0 success cases, 1 failure cases") || !strings.Contains(out, c.want) {
				t.Errorf("want one failure reporting\n  %s\ncrossplane beta validate:\n%s", c.want, out)
			}
		})
	}
}
