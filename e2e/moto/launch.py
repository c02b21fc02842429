#!/usr/bin/env python3
"""moto 5.2.1's server, corrected and seeded for Karpenter v1.14.3's real controller.

    python3 e2e/moto/launch.py --host 127.0.0.1 --port PORT [--seed FILE]

The same HTTP API as `moto_server -H HOST -p PORT` (moto/server.py, main: it is what runs here,
in-process, after the corrections below), until SIGTERM or SIGINT, then exit 0. Every resource
lives in the account MOTO_ACCOUNT_ID (123456789012 without it), as with moto_server.

Seed (--seed FILE, JSON): what AWS itself owns and moto's API refuses to create. Public SSM
parameters, whose names under /aws/ PutParameter refuses (moto/ssm/models.py, put_parameter):

    {"ssmParameters": [
      {"region": "eu-west-1",
       "name": "/aws/service/eks/optimized-ami/1.34/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.34-v20260714/image_id",
       "value": "ami-0123456789abcdef0"}]}

each entry optionally with "account" (default MOTO_ACCOUNT_ID), "type" (default String) and
"dataType" (default text). They answer GetParameter, GetParameters and GetParametersByPath.
Karpenter resolves alias al2023@VERSION on Kubernetes K with one GetParameter per name
(pkg/providers/amifamily/al2023.go:39-80, pkg/providers/ssm/provider.go:53):
/aws/service/eks/optimized-ami/K/amazon-linux-2023/ARCH/VARIANT/amazon-eks-node-al2023-ARCH-VARIANT-K-VERSION/image_id
for x86_64 with standard, nvidia, neuron and arm64 with standard, nvidia (…/recommended/image_id
for @latest); a missing one is skipped.

Images: moto loads them from the JSON list named by env MOTO_AMIS_PATH, instead of its own, in
every region (moto/ec2/models/amis.py:29-33, 187-197). Each entry takes the keyword arguments of
moto's Ami (amis.py:37-63), for example
    {"ami_id": "ami-0123456789abcdef0", "name": "amazon-eks-node-al2023-x86_64-standard-1.34-v20260714",
     "architecture": "x86_64", "state": "available", "creation_date": "2026-07-14T00:00:00Z",
     "owner_id": "602401143452", "public": true, "tags": {}}
Karpenter needs "architecture" x86_64 or arm64 (another or none and the image is ignored,
pkg/providers/amifamily/ami.go:193-196) and the state available (its DescribeImages filters on it,
types.go:111-121); the creation date orders images (ami.go:205-218; moto answers the load time
without one). moto answers no DeprecationTime: no image is ever deprecated.

Corrections (monkeypatches; site-packages untouched):
1. IAM ListInstanceProfiles ignores PathPrefix and answers every profile (moto
   iam/responses.py:452-455). Karpenter's instance-profile garbage collection lists
   /karpenter/REGION/CLUSTER/ and deletes each listed profile no EC2NodeClass or NodeClaim names,
   role removed first (pkg/controllers/nodeclass/garbagecollection/controller.go:104-134,
   pkg/providers/instanceprofile/instanceprofile.go:188-232): on moto, the platform's own node
   profile and other clusters' profiles. Now filtered by prefix, as IAM does.
2. With MOTO_AMIS_PATH, an image's creation_date is parsed in place in the list shared by every
   backend, so the second EC2 backend (a second region or account) fails to parse a datetime
   and every EC2 call there answers 500 (moto ec2/models/amis.py:190-197). Karpenter needs the
   date (amifamily/ami.go:205-218, types.go:60-65). Now a parsed date is kept as it is.
3. CreateFleet launches from a launch template only its image, type, subnet, key, user data and
   tags (moto ec2/models/fleets.py:94-119, 251-269; spot: spot_requests.py:118-130, 190-205):
   no security group of the template (the spot path puts the default VPC's "default" group),
   no instance profile, no metadata options, no AvailabilityZoneId, and a spot instance carries
   no SpotInstanceRequestId. Karpenter v1.14.3 puts its security groups in
   NetworkInterfaces[DeviceIndex 0].Groups, SecurityGroupIds then empty
   (pkg/providers/launchtemplate/types.go:107-139, launchtemplate.go:300-369), reads the
   instance's SecurityGroups, SubnetId, ImageId, Placement.AvailabilityZone(Id) and
   SpotInstanceRequestId (pkg/providers/instance/types.go:61-122), and finds SecurityGroupDrift
   when its groups differ from the EC2NodeClass's (pkg/cloudprovider/drift.go:130-139): every
   node would be replaced. Each instance a fleet launches now carries, as EC2 would, the
   template's groups (SecurityGroupIds, else the primary interface's Groups), instance profile
   (when it exists), metadata options, its subnet's zone ID, and for spot its request.
4. EC2 filters of one name given twice: EC2 ANDs them, moto keeps the last (moto
   ec2/responses/_base_response.py:56-68). Karpenter lists its instances with tag-key
   karpenter.sh/nodepool AND tag-key karpenter.k8s.aws/ec2nodeclass AND the cluster's tag
   (pkg/providers/instance/instance.go:219-240), and its garbage collection terminates each one
   listed that no NodeClaim names (pkg/controllers/nodeclaim/garbagecollection/controller.go:55-110):
   on moto, also an instance of the cluster's without the nodepool tag. A repeated single-valued
   tag-key now also requires its key (as the filter tag:KEY=*).
5. EC2 DescribeCapacityReservations is not implemented: 500 (moto core/responses.py:563; no
   method in moto/ec2/responses/). Karpenter calls it for an EC2NodeClass with
   capacityReservationSelectorTerms (pkg/providers/capacityreservation/provider.go:69-101,
   types.go:39-100), and until it answers the EC2NodeClass is never Ready: its condition
   CapacityReservationsReady (pkg/controllers/nodeclass/capacityreservation.go:53-61,
   pkg/apis/v1/ec2nodeclass_status.go:169-182, cmd/controller/main.go:51-52: feature gate
   ReservedCapacity, on by default). Now answered as EC2 answers an account without
   reservations: none, and InvalidCapacityReservationId.NotFound for an ID (which Karpenter reads
   as none, provider.go:84-91).
6. RunInstances from a launch template whose instance profile IAM does not hold launches (and
   its dry run answers DryRunOperation): moto checks only a profile given in the request itself
   (moto ec2/responses/instances.py, run_instances; ec2/utils.py, filter_iam_instance_profiles).
   Karpenter v1.14.3 names its profile in the launch template (launchtemplate/types.go:96-150)
   and validates each EC2NodeClass with a RunInstances dry run from that template
   (pkg/controllers/nodeclass/validation.go:296-330), reading EC2's refusal of an unknown profile
   as code InvalidParameterValue with "Invalid IAM Instance Profile name" in its message
   (pkg/errors/errors.go:216-224, IsInstanceProfileNotFound; the message also holds
   "iamInstanceProfile.name is invalid", errors.go:258): until the dry run passes, the class is
   not validated and nothing launches. Now refused so. (CreateFleet still launches: correction 3
   leaves such an instance without a profile.)
"""
import argparse
import datetime
import json
import os
import sys


def correct():
    from moto.core.responses import ActionResult
    from moto.ec2.models import amis
    from moto.ec2.exceptions import EC2ClientError
    from moto.ec2.models.fleets import Fleet
    from moto.ec2.models.instances import MetadataOptions
    from moto.ec2.responses import EC2Response
    from moto.ec2.responses._base_response import EC2BaseResponse
    from moto.iam.responses import IamResponse

    # 1. ListInstanceProfiles(PathPrefix).
    def list_instance_profiles(self):
        prefix = self._get_param("PathPrefix") or "/"
        profiles = [p for p in self.backend.get_instance_profiles() if p.path.startswith(prefix)]
        return ActionResult({"InstanceProfiles": profiles})

    IamResponse.list_instance_profiles = list_instance_profiles

    # 2. MOTO_AMIS_PATH images in a second backend.
    parse = amis.parse_timestamp
    amis.parse_timestamp = lambda v: v if isinstance(v, datetime.datetime) else parse(v)

    # 3. What a fleet's instance gets from its launch template.
    def as_ec2_launched(backend, instance, spec, spot_request_id):
        lt = spec.launch_template_spec if spec else None
        if not lt:
            return
        data = backend.get_launch_template(lt["LaunchTemplateId"]).get_version(lt["Version"]).data
        primary = next((n for n in data.get("NetworkInterfaces") or [] if int(n.get("DeviceIndex", 0)) == 0), {})
        ids = data.get("SecurityGroupIds") or primary.get("Groups") or []
        groups = [g for g in map(backend.get_security_group_from_id, ids) if g]
        if groups:
            instance.security_groups = groups
            if 0 in instance.nics:
                instance.nics[0]._group_set = list(groups)
        profile = data.get("IamInstanceProfile") or {}
        if profile and instance.id not in backend.iam_instance_profile_associations:
            try:
                backend.associate_iam_instance_profile(instance.id, profile.get("Name"), profile.get("Arn"))
            except Exception:  # no such profile: EC2 would have refused the launch
                pass
        if data.get("MetadataOptions"):
            instance.metadata_options = MetadataOptions(data["MetadataOptions"])
        if instance.subnet_id:
            instance.placement.availability_zone_id = backend.get_subnet(instance.subnet_id).availability_zone_id
        if spot_request_id:
            instance.spot_instance_request_id = spot_request_id

    fleet_init = Fleet.__init__

    def init(self, *args, **kwargs):
        fleet_init(self, *args, **kwargs)
        for item in self.on_demand_instances:
            as_ec2_launched(self.ec2_backend, item["instance"], item.get("launch_spec"), None)
        for request in self.spot_requests:
            as_ec2_launched(self.ec2_backend, request.instance, request.launch_spec, request.id)

    Fleet.__init__ = init

    # 4. Repeated tag-key filters.
    filters_from_querystring = EC2BaseResponse._filters_from_querystring

    def and_repeated_tag_keys(self):
        filters = filters_from_querystring(self)  # the last of each name
        repeated = [f for f in self._get_param("Filters", []) or self._get_param("Filter", []) if f.get("Name") == "tag-key"]
        for f in repeated[:-1]:
            if len(f.get("Values", [])) == 1:
                filters.setdefault("tag:" + f["Values"][0], ["*"])
        return filters

    EC2BaseResponse._filters_from_querystring = and_repeated_tag_keys

    # 5. DescribeCapacityReservations, in an account without any.
    def describe_capacity_reservations(self):
        for cr in self._get_param("CapacityReservationIds", []):
            raise EC2ClientError("InvalidCapacityReservationId.NotFound", f"The capacity reservation ID '{cr}' does not exist")
        return ActionResult({"CapacityReservations": []})

    EC2Response.describe_capacity_reservations = describe_capacity_reservations

    # 6. RunInstances from a template whose instance profile IAM does not hold.
    from moto.iam import iam_backends
    run_instances = EC2Response.run_instances

    def run_instances_checking_profile(self):
        lt = self._get_param("LaunchTemplate", {}) or {}
        if lt.get("LaunchTemplateId") or lt.get("LaunchTemplateName"):
            template = (self.ec2_backend.get_launch_template(lt["LaunchTemplateId"]) if lt.get("LaunchTemplateId")
                        else self.ec2_backend.get_launch_template_by_name(lt["LaunchTemplateName"]))
            data = template.get_version(lt.get("Version") or "$Default").data
            name = (data.get("IamInstanceProfile") or {}).get("Name")
            held = [p.name for p in iam_backends[self.current_account][self.partition].get_instance_profiles()]
            if name and name not in held:
                raise EC2ClientError("InvalidParameterValue",
                                     f"Value ({name}) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name")
        return run_instances(self)

    EC2Response.run_instances = run_instances_checking_profile


def seed(path):
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.core.utils import utcnow
    from moto.ssm.models import Parameter, ssm_backends

    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    account = os.environ.get("MOTO_ACCOUNT_ID", DEFAULT_ACCOUNT_ID)
    for p in doc.get("ssmParameters", []):
        acct = p.get("account", account)
        versions = ssm_backends[acct][p["region"]]._parameters[p["name"]]
        versions.append(Parameter(
            account_id=acct, name=p["name"], value=p["value"], parameter_type=p.get("type", "String"),
            description=None, allowed_pattern=None, keyid=None, last_modified_date=utcnow(),
            version=len(versions) + 1, data_type=p.get("dataType", "text"), tier="Standard",
        ))
    print(f"seeded {len(doc.get('ssmParameters', []))} SSM parameters from {path}", file=sys.stderr, flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--seed")
    args = parser.parse_args()
    correct()
    if args.seed:
        seed(args.seed)
    from moto.server import main as moto_server

    moto_server(["-H", args.host, "-p", str(args.port)])  # exits 0 on SIGTERM/SIGINT


if __name__ == "__main__":
    main()
