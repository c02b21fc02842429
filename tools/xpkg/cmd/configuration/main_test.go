package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFunctionName(t *testing.T) {
	cases := map[string]struct {
		reason string
		pkg    string
		want   string
	}{
		"Canonical": {
			reason: "The package crossplane.yaml depends on is installed as do-now-function-karpenter.",
			pkg:    "xpkg.crossplane.io/do-now/function-karpenter",
			want:   "do-now-function-karpenter",
		},
		"RegistryWithPort": {
			reason: "The registry host and port are not part of the name, only the repository path.",
			pkg:    "127.0.0.1:5000/acme/function-karpenter",
			want:   "acme-function-karpenter",
		},
		"NestedPath": {
			reason: "Every path segment of the repository is kept, joined by dashes.",
			pkg:    "ghcr.io/acme/platform/function-karpenter",
			want:   "acme-platform-function-karpenter",
		},
		"Long": {
			reason: "The name stops at 63 characters, a DNS label's limit, without a trailing dash.",
			pkg:    "registry.example.com/" + strings.Repeat("a", 60) + "/function-karpenter",
			want:   strings.Repeat("a", 60) + "-fu",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := FunctionName(tc.pkg)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s\nFunctionName(%q): -want, +got:\n%s", tc.reason, tc.pkg, diff)
			}
		})
	}
}

const meta = `apiVersion: meta.pkg.crossplane.io/v1
kind: Configuration
metadata:
  name: configuration-karpenter
spec:
  dependsOn:
    - apiVersion: pkg.crossplane.io/v1
      kind: Function
      package: xpkg.crossplane.io/do-now/function-karpenter
      version: v0.1.0
    - apiVersion: pkg.crossplane.io/v1
      kind: Provider
      package: xpkg.upbound.io/upbound/provider-aws-iam
      version: ">=v2.5.0"
`

const composition = `apiVersion: apiextensions.crossplane.io/v1
kind: Composition
metadata:
  name: karpenter
spec:
  mode: Pipeline
  pipeline:
    - step: karpenter
      functionRef:
        name: %s
`

func TestStage(t *testing.T) {
	cases := map[string]struct {
		reason   string
		pkg      string
		calls    string
		wantDep  string
		wantCall string
		wantErr  string
	}{
		"OtherRegistry": {
			reason:   "Pushed to another organisation, the dependency and every functionRef follow.",
			pkg:      "127.0.0.1:5000/acme/function-karpenter",
			calls:    "do-now-function-karpenter",
			wantDep:  "127.0.0.1:5000/acme/function-karpenter",
			wantCall: "acme-function-karpenter",
		},
		"Canonical": {
			reason:   "Staged for the canonical registry, nothing changes.",
			pkg:      "xpkg.crossplane.io/do-now/function-karpenter",
			calls:    "do-now-function-karpenter",
			wantDep:  "xpkg.crossplane.io/do-now/function-karpenter",
			wantCall: "do-now-function-karpenter",
		},
		"StaleFunctionRef": {
			reason:  "A Composition calling a name no dependency gets would fail in a cluster: refuse it.",
			pkg:     "xpkg.crossplane.io/do-now/function-karpenter",
			calls:   "function-karpenter",
			wantErr: `step karpenter calls function function-karpenter, but the only function dependency is installed as "do-now-function-karpenter"`,
		},
		"NoSuchDependency": {
			reason:  "A package that is not a dependency of the Configuration is refused.",
			pkg:     "xpkg.crossplane.io/do-now/function-other",
			calls:   "do-now-function-karpenter",
			wantErr: "no Function dependency named function-other in spec.dependsOn",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			in := t.TempDir()
			out := filepath.Join(t.TempDir(), "configuration")
			metaFile := filepath.Join(in, "crossplane.yaml")
			compFile := filepath.Join(in, "composition.yaml")
			write(t, metaFile, meta)
			write(t, compFile, strings.ReplaceAll(composition, "%s", tc.calls))

			err := stage(tc.pkg, out, metaFile, []string{compFile})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("%s\nstage(...): want error containing %q, got %v", tc.reason, tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("%s\nstage(...): %v", tc.reason, err)
			}
			m, err := readDocs(filepath.Join(out, "crossplane.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			deps := m[0]["spec"].(map[string]any)["dependsOn"].([]any)
			got := []string{deps[0].(map[string]any)["package"].(string), deps[1].(map[string]any)["package"].(string)}
			if diff := cmp.Diff([]string{tc.wantDep, "xpkg.upbound.io/upbound/provider-aws-iam"}, got); diff != "" {
				t.Errorf("%s\ndependsOn packages: -want, +got:\n%s", tc.reason, diff)
			}
			c, err := readDocs(filepath.Join(out, "composition.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			step := c[0]["spec"].(map[string]any)["pipeline"].([]any)[0].(map[string]any)
			if diff := cmp.Diff(tc.wantCall, step["functionRef"].(map[string]any)["name"]); diff != "" {
				t.Errorf("%s\nfunctionRef name: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

func write(t *testing.T, file, content string) {
	t.Helper()
	if err := os.WriteFile(file, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
