package flux

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/apis/kustomize"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	eks "github.com/upbound/provider-aws/v2/apis/cluster/eks/v1beta1"
	sqs "github.com/upbound/provider-aws/v2/apis/cluster/sqs/v1beta1"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/do-now/function-karpenter/internal/awsres"
	"github.com/do-now/function-karpenter/internal/config"
	"github.com/do-now/function-karpenter/internal/flux"
	"github.com/do-now/function-karpenter/internal/versions"
)

// controllerLabels are the labels the chart puts on the controller's pods.
var controllerLabels = map[string]string{"app.kubernetes.io/name": "karpenter", "app.kubernetes.io/instance": "karpenter"}

// TestControllerValuesReachTheDeployment builds the controller Kustomization
// of every case for each known version and renders that version's values
// with its own chart (karpenterChart), checking what the
// controller's Deployment gets.
func TestControllerValuesReachTheDeployment(t *testing.T) {
	for _, v := range versions.All {
		t.Run(v.Version, func(t *testing.T) { valuesReachTheDeployment(t, v) })
	}
}

func valuesReachTheDeployment(t *testing.T, v versions.Version) {
	fluxSchemas := loadCRDs(t,
		helmController.file(t, "config/crd/bases/helm.toolkit.fluxcd.io_helmreleases.yaml"),
		sourceController.file(t, "config/crd/bases/source.toolkit.fluxcd.io_ocirepositories.yaml"),
	)
	chrt := karpenterChart(t, v)

	type want struct {
		cluster, region string
		namespace, sa   string
		nodeSelector    map[string]string
		tolerations     []corev1.Toleration
		resources       corev1.ResourceRequirements
		// awsFeatureGates is the controller's AWS_FEATURE_GATES.
		awsFeatureGates string
		// nodeRepair is NodeRepair's value in its FEATURE_GATES.
		nodeRepair string
	}
	// The chart's AWS feature gates, all off but those the platform
	// enables and v knows. The 1.14 charts have no settings.awsFeatureGates
	// and render no AWS_FEATURE_GATES (their templates/deployment.yaml);
	// 1.15's does, and 1.15 is the version that knows RebootForRepair.
	gatesOff, reboot := "", ""
	if _, known := v.Gates[versions.RebootForRepair]; known {
		gatesOff = "NodeClassCEL=false,DRANVIDIAGPU=false,DRAEFA=false,RebootForRepair=false"
		reboot = "NodeClassCEL=false,DRANVIDIAGPU=false,DRAEFA=false,RebootForRepair=true"
	}
	// The platform's defaults, which fit the system floor (docs/platform.md "The
	// system floor"): requests of 500m and 512Mi, limits of 1 CPU and 1Gi.
	floor := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{"cpu": resource.MustParse("500m"), "memory": resource.MustParse("512Mi")},
		Limits:   corev1.ResourceList{"cpu": resource.MustParse("1"), "memory": resource.MustParse("1Gi")},
	}
	example := want{
		cluster: exampleCluster, region: exampleRegion,
		namespace: "karpenter", sa: "karpenter",
		nodeSelector:    map[string]string{"socle.do-now.io/node-group": "system"},
		tolerations:     []corev1.Toleration{{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists}},
		resources:       floor,
		awsFeatureGates: gatesOff,
		nodeRepair:      "false",
	}
	exampleWith := func(awsFeatureGates string) want {
		w := example
		w.awsFeatureGates = awsFeatureGates
		w.nodeRepair = "true"
		return w
	}
	cases := map[string]struct {
		reason string
		spec   edits
		input  edits
		want   want
	}{
		"Example": {
			reason: "The example claim and Composition: the controller runs as karpenter/karpenter on the system nodes.",
			want:   example,
		},
		"RebootForRepair": {
			reason: "The platform enables node repair and RebootForRepair: every version gets NodeRepair, RebootForRepair only the version that knows it (1.15).",
			input:  edits{"controller.featureGates": []string{"NodeRepair", "RebootForRepair"}},
			want:   exampleWith(reboot),
		},
		"PlatformPlacement": {
			reason: "Another cluster, namespace, service account, system nodes and resources: the platform's settings replace the chart's own, and the chart's default toleration is gone.",
			spec: edits{
				"cluster.name":   "staging_us",
				"cluster.region": "us-east-1",
			},
			input: edits{
				"podIdentity": map[string]string{"namespace": "autoscaling", "serviceAccount": "karpenter-controller"},
				"controller": map[string]any{
					"resources": map[string]any{
						"requests": map[string]string{"cpu": "500m", "memory": "768Mi"},
						"limits":   map[string]string{"memory": "2Gi"},
					},
					"nodeSelector": map[string]string{"node.example.com/role": "system", "node.example.com/fixed": "true"},
					"tolerations": []map[string]string{
						{"key": "node.example.com/role", "operator": "Equal", "value": "system", "effect": "NoSchedule"},
					},
				},
			},
			want: want{
				cluster: "staging_us", region: "us-east-1",
				namespace: "autoscaling", sa: "karpenter-controller",
				nodeSelector: map[string]string{"node.example.com/role": "system", "node.example.com/fixed": "true"},
				tolerations: []corev1.Toleration{
					{Key: "node.example.com/role", Operator: corev1.TolerationOpEqual, Value: "system", Effect: corev1.TaintEffectNoSchedule},
				},
				resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{"cpu": resource.MustParse("500m"), "memory": resource.MustParse("768Mi")},
					Limits:   corev1.ResourceList{"memory": resource.MustParse("2Gi")},
				},
				awsFeatureGates: gatesOff,
				nodeRepair:      "false",
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := load(t, tc.spec.with("version", v.Version), tc.input)
			built := byKindName(fluxBuild(t, controllerKustomization(t, c)))
			if diff := cmp.Diff([]string{"HelmRelease/karpenter", "OCIRepository/karpenter"}, keys(built)); diff != "" {
				t.Fatalf("\n%s\nbuilt objects: -want, +got:\n%s", tc.reason, diff)
			}
			for _, o := range built {
				if o.GetNamespace() != tc.want.namespace {
					t.Errorf("\n%s\n%s %s: namespace %q, want %q", tc.reason, o.GetKind(), o.GetName(), o.GetNamespace(), tc.want.namespace)
				}
			}
			oci := fluxSchemas.mustAdmit(t, built["OCIRepository/karpenter"])
			if tag, _, _ := unstructured.NestedString(oci.Object, "spec", "ref", "tag"); tag != v.Chart {
				t.Errorf("\n%s\nOCIRepository: chart tag %q, want %s", tc.reason, tag, v.Chart)
			}

			// The values as the API server would store them: they go through
			// the HelmRelease CRD's pruning and defaulting on create.
			hr := fluxSchemas.mustAdmit(t, built["HelmRelease/karpenter"])
			for _, o := range []*unstructured.Unstructured{built["HelmRelease/karpenter"], hr} {
				anti, _, _ := unstructured.NestedMap(o.Object, "spec", "values", "affinity", "podAntiAffinity")
				if v, ok := anti["requiredDuringSchedulingIgnoredDuringExecution"].([]any); !ok || len(v) != 0 {
					t.Errorf("\n%s\nHelmRelease values: want an explicit empty list for the chart's required pod anti-affinity, got %v", tc.reason, anti["requiredDuringSchedulingIgnoredDuringExecution"])
				}
			}
			values, _, err := unstructured.NestedMap(hr.Object, "spec", "values")
			if err != nil {
				t.Fatal(err)
			}

			rendered := renderChart(t, chrt, values, tc.want.namespace)
			var deployments []*unstructured.Unstructured
			for _, o := range rendered {
				switch o.GetKind() {
				case "ServiceAccount":
					t.Errorf("\n%s\nthe chart renders ServiceAccount %s: want none, step three creates the one the association names", tc.reason, o.GetName())
				case "Deployment":
					deployments = append(deployments, o)
				}
			}
			if len(deployments) != 1 {
				t.Fatalf("\n%s\nthe chart renders %d Deployments, want 1", tc.reason, len(deployments))
			}
			var d appsv1.Deployment
			decodeStrict(t, deployments[0], &d)

			wiring := awsres.Wiring(c, awsres.Observed{})
			assoc := wiring[awsres.PodIdentityAssociation].(*eks.PodIdentityAssociation).Spec.ForProvider
			identity, err := awsres.Identity(c)
			if err != nil {
				t.Fatal(err)
			}
			queue := *identity[awsres.InterruptionQueue].(*sqs.Queue).Spec.ForProvider.Name

			if d.Namespace != *assoc.Namespace || d.Namespace != tc.want.namespace {
				t.Errorf("\n%s\nDeployment namespace %q, want %q, the Pod Identity association's", tc.reason, d.Namespace, *assoc.Namespace)
			}
			pod := d.Spec.Template.Spec
			if pod.ServiceAccountName != *assoc.ServiceAccount || pod.ServiceAccountName != tc.want.sa {
				t.Errorf("\n%s\nserviceAccountName %q, want %q, the Pod Identity association's", tc.reason, pod.ServiceAccountName, *assoc.ServiceAccount)
			}
			if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
				t.Errorf("\n%s\nreplicas %v, want 2", tc.reason, d.Spec.Replicas)
			}

			if len(pod.Containers) != 1 {
				t.Fatalf("\n%s\nthe controller pod has %d containers, want 1", tc.reason, len(pod.Containers))
			}
			// Quantities compared by value: the chart renders 1Gi back as 1Gi,
			// but a parsed quantity keeps no canonical string.
			if diff := cmp.Diff(tc.want.resources, pod.Containers[0].Resources, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); diff != "" {
				t.Errorf("\n%s\ncontroller resources: -want, +got:\n%s", tc.reason, diff)
			}
			env := map[string][]string{}
			for _, e := range pod.Containers[0].Env {
				env[e.Name] = append(env[e.Name], e.Value)
			}
			wantEnv := map[string]string{
				"CLUSTER_NAME":       tc.want.cluster,
				"INTERRUPTION_QUEUE": tc.want.cluster + "-karpenter", // the queue's name, not its ARN or URL
				"AWS_REGION":         tc.want.region,
				"EKS_CONTROL_PLANE":  "true",
				"AWS_FEATURE_GATES":  tc.want.awsFeatureGates,
			}
			for k, v := range wantEnv {
				want := []string{v}
				if v == "" {
					want = nil // the chart renders no such variable
				}
				if diff := cmp.Diff(want, env[k]); diff != "" {
					t.Errorf("\n%s\nenv %s: -want, +got:\n%s", tc.reason, k, diff)
				}
			}
			core := map[string]string{}
			for _, kv := range strings.Split(strings.Join(env["FEATURE_GATES"], ""), ",") {
				k, v, _ := strings.Cut(kv, "=")
				core[k] = v
			}
			if core["NodeRepair"] != tc.want.nodeRepair {
				t.Errorf("\n%s\nFEATURE_GATES %v: NodeRepair=%q, want %q", tc.reason, env["FEATURE_GATES"], core["NodeRepair"], tc.want.nodeRepair)
			}
			if queue != tc.want.cluster+"-karpenter" {
				t.Errorf("\n%s\nthe composed queue is %q, the controller reads %v", tc.reason, queue, env["INTERRUPTION_QUEUE"])
			}

			selector := &metav1.LabelSelector{MatchLabels: controllerLabels}
			wantAffinity := &corev1.Affinity{
				NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
						{Key: "karpenter.sh/nodepool", Operator: corev1.NodeSelectorOpDoesNotExist},
					}}},
				}},
				PodAntiAffinity: &corev1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
					Weight:          100,
					PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname, LabelSelector: selector},
				}}},
			}
			// No required anti-affinity: an empty list and none are the same.
			if diff := cmp.Diff(wantAffinity, pod.Affinity, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("\n%s\naffinity: -want, +got:\n%s", tc.reason, diff)
			}
			wantSpread := []corev1.TopologySpreadConstraint{{
				MaxSkew:           1,
				TopologyKey:       corev1.LabelTopologyZone,
				WhenUnsatisfiable: corev1.ScheduleAnyway,
				LabelSelector:     selector,
			}}
			if diff := cmp.Diff(wantSpread, pod.TopologySpreadConstraints); diff != "" {
				t.Errorf("\n%s\ntopologySpreadConstraints: -want, +got:\n%s", tc.reason, diff)
			}
			// Helm merges maps: the chart's own kubernetes.io/os=linux stays
			// beside the platform's selector.
			wantSelector := maps.Clone(tc.want.nodeSelector)
			wantSelector["kubernetes.io/os"] = "linux"
			if diff := cmp.Diff(wantSelector, pod.NodeSelector); diff != "" {
				t.Errorf("\n%s\nnodeSelector: -want, +got:\n%s", tc.reason, diff)
			}
			if diff := cmp.Diff(tc.want.tolerations, pod.Tolerations); diff != "" {
				t.Errorf("\n%s\ntolerations: -want, +got:\n%s", tc.reason, diff)
			}
		})
	}
}

// version is the claim's Karpenter version, as internal/versions has it.
func version(t *testing.T, c *config.Config) versions.Version {
	t.Helper()
	v, err := versions.Get(string(c.Spec.Version))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// controllerKustomization is step four's Kustomization for a claim, as its
// Object delivers it to the claimed cluster.
func controllerKustomization(t *testing.T, c *config.Config) *kustomizev1.Kustomization {
	t.Helper()
	return kustomization(t, flux.Controller, c, version(t, c), flux.ControllerKustomization)
}

// karpenterChart loads the chart of release v from its tag's module zip
// (v.Module), its version stamped as Karpenter's release stamps it before it
// packages the chart (hack/release/common.sh, publishHelmChart): the tag's
// Chart.yaml still names an earlier release.
func karpenterChart(t *testing.T, v versions.Version) *chart.Chart {
	t.Helper()
	files := karpenterModule(t, v.Module).files(t, "charts/karpenter")
	buffered := make([]*loader.BufferedFile, 0, len(files))
	for _, name := range keys(files) {
		buffered = append(buffered, &loader.BufferedFile{Name: name, Data: files[name]})
	}
	c, err := loader.LoadFiles(buffered)
	if err != nil {
		t.Fatalf("cannot load the Karpenter chart: %v", err)
	}
	c.Metadata.Version, c.Metadata.AppVersion = v.Chart, v.Chart
	return c
}

// renderChart renders a chart as helm-controller's install does, without a
// cluster: helm-controller passes the HelmRelease's values (merged with
// valuesFrom, of which there are none, by a merge that keeps nulls) to Helm's
// install action, which coalesces them with the chart's values, validates
// them against the chart's schema if it has one, and renders the templates.
func renderChart(t *testing.T, c *chart.Chart, values map[string]any, namespace string) []*unstructured.Unstructured {
	t.Helper()
	if err := chartutil.ProcessDependenciesWithMerge(c, values); err != nil {
		t.Fatal(err)
	}
	opts := chartutil.ReleaseOptions{Name: "karpenter", Namespace: namespace, Revision: 1, IsInstall: true}
	rv, err := chartutil.ToRenderValuesWithSchemaValidation(c, values, opts, chartutil.DefaultCapabilities, false)
	if err != nil {
		t.Fatalf("Helm refuses the values: %v", err)
	}
	manifests, err := engine.Render(c, rv)
	if err != nil {
		t.Fatalf("the Karpenter chart does not render: %v", err)
	}
	var objs []*unstructured.Unstructured
	for _, name := range keys(manifests) {
		if strings.HasSuffix(name, "NOTES.txt") {
			continue
		}
		objs = append(objs, decodeObjects(t, []byte(manifests[name]))...)
	}
	return objs
}

// TestControllerBaseWithoutTheHelmRelease: a platform base whose HelmRelease
// is not the one the values patch targets fails the controller Kustomization's
// build, as kustomize-controller would report it, instead of installing
// Karpenter without the claim's values. Without the function's identity patch
// the same build succeeds, the HelmRelease's values left empty: kustomize
// applies a JSON 6902 patch to no resource without an error.
func TestControllerBaseWithoutTheHelmRelease(t *testing.T) {
	k := controllerKustomization(t, load(t, nil, nil))
	renamed := func(base string) {
		file := filepath.Join(base, "controller", "helmrelease.yaml")
		var hr map[string]any
		readYAML(t, file, &hr)
		hr["metadata"].(map[string]any)["name"] = "karpenter-controller"
		b, err := yaml.Marshal(hr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	_, err := fluxBuildOf(t, k, renamed)
	if err == nil || !strings.Contains(err.Error(), "HelmRelease") || !strings.Contains(err.Error(), flux.HelmReleaseName) {
		t.Fatalf("the build over a base whose HelmRelease is renamed: %v, want it to fail naming HelmRelease %s", err, flux.HelmReleaseName)
	}
	t.Logf("over a base whose HelmRelease is renamed: %v", err)

	valuesOnly := k.DeepCopy()
	valuesOnly.Spec.Patches = slices.DeleteFunc(valuesOnly.Spec.Patches, func(p kustomize.Patch) bool { return p.Target == nil })
	if len(valuesOnly.Spec.Patches) != 1 {
		t.Fatalf("want the values patch alone, with a target, got %v", valuesOnly.Spec.Patches)
	}
	built, err := fluxBuildOf(t, valuesOnly, renamed)
	if err != nil {
		t.Fatalf("the values patch alone over the renamed base: %v, want kustomize to apply it to nothing", err)
	}
	hr := byKindName(built)["HelmRelease/karpenter-controller"]
	if values, _, _ := unstructured.NestedMap(hr.Object, "spec", "values"); hr == nil || len(values) != 0 {
		t.Errorf("the values patch alone over the renamed base: HelmRelease %v, want it built with the base's empty values", hr)
	}
}
