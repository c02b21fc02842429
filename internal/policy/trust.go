package policy

// PodIdentityPrincipal is the service that assumes roles for EKS Pod Identity
// associations. It is the same name in every partition.
const PodIdentityPrincipal = "pods.eks.amazonaws.com"

// ControllerTrust is the trust policy of the controller role: only EKS Pod
// Identity may assume it, and tag the session with the pod's attributes.
func ControllerTrust() Document {
	return Document{
		Version: Version,
		Statement: []Statement{{
			Sid:       "AllowEKSPodIdentity",
			Effect:    Allow,
			Principal: &Principal{Service: one(PodIdentityPrincipal)},
			Action:    []string{"sts:AssumeRole", "sts:TagSession"},
		}},
	}
}
