package flux

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/do-now/function-karpenter/internal/cluster"
	"github.com/do-now/function-karpenter/internal/config"
	"github.com/do-now/function-karpenter/internal/versions"
)

// ControllerLabels select the controller's pods, as the chart labels them.
var ControllerLabels = map[string]string{
	"app.kubernetes.io/name":     "karpenter",
	"app.kubernetes.io/instance": "karpenter",
}

// Values are the Karpenter chart values the function sets, keyed as the
// chart's values.yaml reads them.
type Values struct {
	Replicas       int32               `json:"replicas"`
	ServiceAccount ServiceAccount      `json:"serviceAccount"`
	Settings       Settings            `json:"settings"`
	Controller     ControllerBlock     `json:"controller"`
	NodeSelector   map[string]string   `json:"nodeSelector,omitempty"`
	Tolerations    []corev1.Toleration `json:"tolerations,omitempty"`
	// Affinity is a map, not corev1.Affinity: Helm merges values into the
	// chart's defaults, so the chart's required one-per-node anti-affinity
	// must be overridden explicitly, with an empty list (a null would do too,
	// but Flux's server-side apply can drop a null added by a later update).
	Affinity                  map[string]any                    `json:"affinity"`
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints"`
}

// ServiceAccount turns the chart's own ServiceAccount off in favour of the
// one step three created, which the Pod Identity association names.
type ServiceAccount struct {
	Create bool   `json:"create"`
	Name   string `json:"name"`
}

// Settings are the chart's settings block.
type Settings struct {
	ClusterName string `json:"clusterName"`
	// InterruptionQueue is the queue's name: the chart wants neither its
	// URL nor its ARN.
	InterruptionQueue string `json:"interruptionQueue"`
	EKSControlPlane   bool   `json:"eksControlPlane"`
	// FeatureGates and AWSFeatureGates are the gates the platform enables
	// that this version knows, under the chart's keys.
	FeatureGates    map[string]any `json:"featureGates,omitempty"`
	AWSFeatureGates map[string]any `json:"awsFeatureGates,omitempty"`
}

// ControllerBlock is the chart's controller block.
type ControllerBlock struct {
	Env       []corev1.EnvVar              `json:"env"`
	Resources *corev1.ResourceRequirements `json:"resources"`
}

// ControllerValues are the chart values of Karpenter v for a claim.
func ControllerValues(c *config.Config, v versions.Version) Values {
	selector := &metav1.LabelSelector{MatchLabels: ControllerLabels}
	size := c.ControllerSize()
	gates := v.Values(c.Gates())
	return Values{
		Replicas:       *size.Replicas,
		ServiceAccount: ServiceAccount{Create: false, Name: c.Input.PodIdentity.ServiceAccount},
		Settings: Settings{
			ClusterName:       c.Spec.Cluster.Name,
			InterruptionQueue: c.Names.Queue,
			EKSControlPlane:   true,
			FeatureGates:      gates[versions.CoreGates],
			AWSFeatureGates:   gates[versions.AWSGates],
		},
		Controller: ControllerBlock{
			Env:       []corev1.EnvVar{{Name: "AWS_REGION", Value: c.Spec.Cluster.Region}},
			Resources: size.Resources,
		},
		NodeSelector: c.Input.Controller.NodeSelector,
		Tolerations:  c.Input.Controller.Tolerations,
		Affinity: map[string]any{
			"nodeAffinity": cluster.NotOnManagedNodes().NodeAffinity,
			"podAntiAffinity": map[string]any{
				"requiredDuringSchedulingIgnoredDuringExecution": []corev1.PodAffinityTerm{},
				"preferredDuringSchedulingIgnoredDuringExecution": []corev1.WeightedPodAffinityTerm{{
					Weight:          100,
					PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname, LabelSelector: selector},
				}},
			},
		},
		TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{
			MaxSkew:           1,
			TopologyKey:       corev1.LabelTopologyZone,
			WhenUnsatisfiable: corev1.ScheduleAnyway,
			LabelSelector:     selector,
		}},
	}
}
