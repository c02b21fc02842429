package policy

// FinalCheck is the final check's inline policy: it lists the claimed
// cluster's instances (ec2:DescribeInstances) in the cluster's region and
// can do nothing else. EC2's Describe* actions support no resource-level
// permissions, so its Resource is "*" (Amazon EC2 User Guide, "Identity-based
// policies for Amazon EC2": https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/iam-policies-for-amazon-ec2.html;
// the Service Authorization Reference's EC2 table lists no resource type for
// it: https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonec2.html),
// and the region is held by the global key aws:RequestedRegion, as the
// controller policy's AllowRegionalReadActions holds it.
func FinalCheck(region string) Document {
	return Document{
		Version: Version,
		Statement: []Statement{{
			Sid:       "AllowListingInstancesInTheClusterRegion",
			Effect:    Allow,
			Resource:  one("*"),
			Action:    one("ec2:DescribeInstances"),
			Condition: Condition{"StringEquals": {"aws:RequestedRegion": one(region)}},
		}},
	}
}
