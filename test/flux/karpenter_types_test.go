package flux

// The parts of Karpenter v1's NodePool and EC2NodeClass the base and the
// patches set, as the tests read them. Objects are decoded strictly: a field
// the tests do not know about fails the decoding, so the assertions cover
// everything Flux would apply. (Karpenter's own Go API needs a newer Go than
// this project; its CRDs, which the objects are also validated against, are
// the authority.)

type objectMeta struct {
	Name      string            `json:"name"`
	Namespace string            `json:"namespace,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
}

type nodePool struct {
	APIVersion string       `json:"apiVersion"`
	Kind       string       `json:"kind"`
	Metadata   objectMeta   `json:"metadata"`
	Spec       nodePoolSpec `json:"spec"`
}

type nodePoolSpec struct {
	Template   nodeClaimTemplate `json:"template"`
	Limits     map[string]string `json:"limits"`
	Disruption disruption        `json:"disruption"`
}

type nodeClaimTemplate struct {
	Metadata struct {
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec nodeClaimSpec `json:"spec"`
}

type nodeClaimSpec struct {
	NodeClassRef           nodeClassRef  `json:"nodeClassRef"`
	Requirements           []requirement `json:"requirements"`
	Taints                 []taint       `json:"taints"`
	StartupTaints          []taint       `json:"startupTaints"`
	ExpireAfter            string        `json:"expireAfter"`
	TerminationGracePeriod string        `json:"terminationGracePeriod"`
}

type nodeClassRef struct {
	Group string `json:"group"`
	Kind  string `json:"kind"`
	Name  string `json:"name"`
}

type requirement struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values"`
}

type taint struct {
	Key    string `json:"key"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect"`
}

type disruption struct {
	ConsolidationPolicy string   `json:"consolidationPolicy"`
	ConsolidateAfter    string   `json:"consolidateAfter"`
	Budgets             []budget `json:"budgets"`
}

type budget struct {
	Nodes string `json:"nodes"`
}

type ec2NodeClass struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Metadata   objectMeta       `json:"metadata"`
	Spec       ec2NodeClassSpec `json:"spec"`
}

type ec2NodeClassSpec struct {
	InstanceProfile            string               `json:"instanceProfile"`
	AMISelectorTerms           []amiSelectorTerm    `json:"amiSelectorTerms"`
	SubnetSelectorTerms        []selectorTerm       `json:"subnetSelectorTerms"`
	SecurityGroupSelectorTerms []selectorTerm       `json:"securityGroupSelectorTerms"`
	AssociatePublicIPAddress   *bool                `json:"associatePublicIPAddress,omitempty"`
	MetadataOptions            metadataOptions      `json:"metadataOptions"`
	BlockDeviceMappings        []blockDeviceMapping `json:"blockDeviceMappings"`
	UserData                   *string              `json:"userData,omitempty"`
	Tags                       map[string]string    `json:"tags,omitempty"`

	CapacityReservationSelectorTerms []reservationTerm `json:"capacityReservationSelectorTerms,omitempty"`
	Kubelet                          *kubelet          `json:"kubelet,omitempty"`
}

type reservationTerm struct {
	ID      string            `json:"id,omitempty"`
	OwnerID string            `json:"ownerID,omitempty"`
	Tags    map[string]string `json:"tags,omitempty"`
}

type kubelet struct {
	MaxPods int32 `json:"maxPods"`
}

type amiSelectorTerm struct {
	Alias string `json:"alias"`
}

type selectorTerm struct {
	Tags map[string]string `json:"tags,omitempty"`
	Name string            `json:"name,omitempty"`
}

type metadataOptions struct {
	HTTPEndpoint            string `json:"httpEndpoint"`
	HTTPProtocolIPv6        string `json:"httpProtocolIPv6"`
	HTTPPutResponseHopLimit int64  `json:"httpPutResponseHopLimit"`
	HTTPTokens              string `json:"httpTokens"`
}

type blockDeviceMapping struct {
	DeviceName string `json:"deviceName"`
	EBS        struct {
		VolumeSize          string `json:"volumeSize"`
		VolumeType          string `json:"volumeType"`
		Encrypted           bool   `json:"encrypted"`
		DeleteOnTermination bool   `json:"deleteOnTermination"`
	} `json:"ebs"`
}

// nodeConfig is AL2023's nodeadm configuration, as the public pool's user
// data carries it.
type nodeConfig struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Spec       struct {
		Kubelet struct {
			Flags []string `json:"flags"`
		} `json:"kubelet"`
	} `json:"spec"`
}
