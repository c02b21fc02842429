package policy

// PodIdentityPrincipal is the service that assumes roles for EKS Pod Identity
// associations. It is the same name in every partition.
const PodIdentityPrincipal = "pods.eks.amazonaws.com"

// Condition keys EKS Pod Identity sets when it assumes a role: the account
// of the cluster, and the session tags naming the cluster (by name and by
// ARN, which holds its region and account) and the pod's namespace and
// service account. The session tags are those "List of session tags added
// by EKS Pod Identity" gives
// (https://docs.aws.amazon.com/eks/latest/userguide/pod-id-abac.html).
const (
	SourceAccountKey  = "aws:SourceAccount"
	ClusterTagKey     = "aws:RequestTag/eks-cluster-name"
	ClusterARNTagKey  = "aws:RequestTag/eks-cluster-arn"
	NamespaceTagKey   = "aws:RequestTag/kubernetes-namespace"
	ServiceAccountKey = "aws:RequestTag/kubernetes-service-account"
)

// Binding is the one Pod Identity association a role is for: the
// controller's, or the final check's.
type Binding struct {
	Account string
	Cluster string
	// ClusterARN pins the cluster by region too: a cluster of the same
	// name in another region of the account cannot bind the role.
	ClusterARN     string
	Namespace      string
	ServiceAccount string
}

// PodIdentityTrust is the trust policy of a role EKS Pod Identity serves
// (the controller's, the final check's): only EKS Pod Identity may assume it
// and tag the session, and only for the one service account of b in the
// claimed cluster of the account. Without the
// conditions any Pod Identity association in the account could bind it.
func PodIdentityTrust(b Binding) Document {
	return Document{
		Version: Version,
		Statement: []Statement{{
			Sid:       "AllowEKSPodIdentity",
			Effect:    Allow,
			Principal: &Principal{Service: one(PodIdentityPrincipal)},
			Action:    []string{"sts:AssumeRole", "sts:TagSession"},
			Condition: Condition{"StringEquals": {
				SourceAccountKey:  one(b.Account),
				ClusterTagKey:     one(b.Cluster),
				ClusterARNTagKey:  one(b.ClusterARN),
				NamespaceTagKey:   one(b.Namespace),
				ServiceAccountKey: one(b.ServiceAccount),
			}},
		}},
	}
}
