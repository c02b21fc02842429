#!/usr/bin/env python3
"""Checks launch.py: starts it on a free loopback port with images and a seed of its own, makes
the calls Karpenter v1.14.3 makes, shaped as it makes them, and exits non-zero on a wrong answer.

    python3 e2e/moto/launch_check.py

It needs boto3 (moto's own dependency). Each wrong answer is printed; the launcher's log is
printed too when one is wrong.
"""
import base64
import datetime
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

HERE = os.path.dirname(os.path.abspath(__file__))
ACCOUNT = os.environ.get("MOTO_ACCOUNT_ID", "111122223333")
REGION, OTHER_REGION, CLUSTER, K8S, ALIAS_VERSION = "eu-west-1", "us-east-1", "prod-eu", "1.34", "v20260714"
AMI = {"x86_64": "ami-0e2e0000000000001", "arm64": "ami-0e2e0000000000002"}
failures = []


def check(ok, what):
    print(("ok    " if ok else "WRONG ") + what)
    if not ok:
        failures.append(what)


def code(call):
    try:
        call()
    except ClientError as e:
        return e.response["Error"]["Code"]
    return None


def ssm_name(arch, variant):  # pkg/providers/amifamily/al2023.go:73-80
    return (f"/aws/service/eks/optimized-ami/{K8S}/amazon-linux-2023/{arch}/{variant}/"
            f"amazon-eks-node-al2023-{arch}-{variant}-{K8S}-{ALIAS_VERSION}/image_id")


def tags(d):
    return [{"Key": k, "Value": v} for k, v in sorted(d.items())]


def as_dict(tag_list):
    return {t["Key"]: t["Value"] for t in tag_list or []}


def start(tmp):
    images = [{"ami_id": AMI[a], "name": f"amazon-eks-node-al2023-{a}-standard-{K8S}-{ALIAS_VERSION}",
               "architecture": a, "state": "available", "creation_date": "2026-07-14T00:00:00Z",
               "owner_id": "602401143452", "public": True, "virtualization_type": "hvm",
               "root_device_type": "ebs", "root_device_name": "/dev/xvda", "tags": {}} for a in AMI]
    seed = {"ssmParameters": [{"region": REGION, "name": ssm_name(a, "standard"), "value": AMI[a]} for a in AMI]}
    with open(os.path.join(tmp, "amis.json"), "w") as f:
        json.dump(images, f)
    with open(os.path.join(tmp, "seed.json"), "w") as f:
        json.dump(seed, f)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, MOTO_ACCOUNT_ID=ACCOUNT, MOTO_AMIS_PATH=os.path.join(tmp, "amis.json"))
    log = open(os.path.join(tmp, "moto.log"), "w")
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, "launch.py"), "--host", "127.0.0.1",
                             "--port", str(port), "--seed", os.path.join(tmp, "seed.json")],
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    endpoint = f"http://127.0.0.1:{port}"
    # moto imports every service it emulates: minutes on a loaded two-core machine (a niced run
    # beside a whole make test waited over two).
    deadline = time.time() + 300
    while True:
        try:
            with urllib.request.urlopen(endpoint + "/moto-api/", timeout=5) as r:
                if r.status == 200:
                    return proc, endpoint
        except OSError:
            pass
        if proc.poll() is not None or time.time() > deadline:
            raise SystemExit(f"launch.py did not answer /moto-api/ (exit {proc.poll()}):\n" + open(log.name).read())
        time.sleep(0.5)


def run(endpoint):
    def client(service, region=REGION):
        return boto3.client(service, region_name=region, endpoint_url=endpoint, aws_access_key_id="e2e",
                            aws_secret_access_key="e2e", config=Config(retries={"max_attempts": 1}))

    ec2, iam, ssm = client("ec2"), client("iam"), client("ssm")

    # Seeded public SSM parameters, read as Karpenter reads them (one GetParameter each), and by
    # GetParameters and GetParametersByPath.
    for arch in AMI:
        got = ssm.get_parameter(Name=ssm_name(arch, "standard"))["Parameter"]["Value"]
        check(got == AMI[arch], f"GetParameter {ssm_name(arch, 'standard')} = {got}")
    check(code(lambda: ssm.get_parameter(Name=ssm_name("x86_64", "nvidia"))) == "ParameterNotFound",
          "GetParameter of an unseeded variant: ParameterNotFound (Karpenter skips it)")
    out = ssm.get_parameters(Names=[ssm_name(a, "standard") for a in AMI] + ["/aws/service/none"])
    check(sorted(p["Value"] for p in out["Parameters"]) == sorted(AMI.values())
          and out["InvalidParameters"] == ["/aws/service/none"], "GetParameters")
    out = ssm.get_parameters_by_path(Path=f"/aws/service/eks/optimized-ami/{K8S}", Recursive=True)
    check(sorted(p["Value"] for p in out["Parameters"]) == sorted(AMI.values()), "GetParametersByPath")

    # Images from MOTO_AMIS_PATH as Karpenter asks for them (amifamily/types.go:111-121), in two
    # regions (the second EC2 backend failed before correction 2).
    for region in (REGION, OTHER_REGION):
        images = client("ec2", region).describe_images(
            Filters=[{"Name": "image-id", "Values": list(AMI.values())}, {"Name": "state", "Values": ["available"]}],
            IncludeDeprecated=True, MaxResults=1000)["Images"]
        arch = {i["ImageId"]: i.get("Architecture") for i in images}
        dates = [datetime.datetime.fromisoformat(i["CreationDate"].replace("Z", "+00:00")) for i in images]
        check(arch == {v: k for k, v in AMI.items()} and all(d.year == 2026 for d in dates),
              f"DescribeImages in {region}: {arch}, creation dates {[i['CreationDate'] for i in images]}")

    # Instance profiles: the platform's under /, this cluster's and another's under /karpenter/.
    iam.create_role(RoleName="nodes", AssumeRolePolicyDocument=json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]}))
    for name, path in [("platform-nodes", "/"), (f"{CLUSTER}_1234", f"/karpenter/{REGION}/{CLUSTER}/uid-1/"),
                       ("prod-eu-2_5678", f"/karpenter/{REGION}/prod-eu-2/uid-2/")]:
        iam.create_instance_profile(InstanceProfileName=name, Path=path)
        iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName="nodes")
    listed = [p["InstanceProfileName"] for p in
              iam.list_instance_profiles(PathPrefix=f"/karpenter/{REGION}/{CLUSTER}/")["InstanceProfiles"]]
    check(listed == [f"{CLUSTER}_1234"], f"ListInstanceProfiles(PathPrefix=/karpenter/{REGION}/{CLUSTER}/) = {listed}")
    listed = [p["InstanceProfileName"] for p in iam.list_instance_profiles()["InstanceProfiles"]]
    check(sorted(listed) == sorted(["platform-nodes", f"{CLUSTER}_1234", "prod-eu-2_5678"]), f"ListInstanceProfiles() = {listed}")
    profile_arn = iam.get_instance_profile(InstanceProfileName=f"{CLUSTER}_1234")["InstanceProfile"]["Arn"]

    # The network, tagged as the EC2NodeClass selects it.
    vpc = ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnets = {}
    for zone, cidr in [("eu-west-1a", "10.0.1.0/24"), ("eu-west-1b", "10.0.2.0/24")]:
        subnets[zone] = ec2.create_subnet(VpcId=vpc, CidrBlock=cidr, AvailabilityZone=zone, TagSpecifications=[
            {"ResourceType": "subnet", "Tags": tags({"kubernetes.io/role/internal-elb": "1"})}])["Subnet"]
    sg = ec2.create_security_group(GroupName=f"{CLUSTER}-nodes", Description="nodes", VpcId=vpc, TagSpecifications=[
        {"ResourceType": "security-group", "Tags": tags({"aws:eks:cluster-name": CLUSTER})}])["GroupId"]
    ec2.create_security_group(GroupName="other", Description="other", VpcId=vpc)
    found = ec2.describe_subnets(Filters=[{"Name": "tag:kubernetes.io/role/internal-elb", "Values": ["1"]}], MaxResults=500)["Subnets"]
    check(sorted(s["SubnetId"] for s in found) == sorted(s["SubnetId"] for s in subnets.values())
          and all(s.get("AvailabilityZoneId") and s.get("AvailableIpAddressCount") for s in found),
          "DescribeSubnets by tag: both subnets, with AvailabilityZoneId and AvailableIpAddressCount")
    found = ec2.describe_security_groups(Filters=[{"Name": "tag:aws:eks:cluster-name", "Values": [CLUSTER]}], MaxResults=500)["SecurityGroups"]
    check([g["GroupId"] for g in found] == [sg], "DescribeSecurityGroups by tag: the nodes' group only")
    found = ec2.describe_security_groups(Filters=[{"Name": "group-name", "Values": [f"{CLUSTER}-nodes"]}], MaxResults=500)["SecurityGroups"]
    check([g["GroupId"] for g in found] == [sg], "DescribeSecurityGroups by name (securitygroup.go:100-120): the nodes' group only")

    # Start-up and offering calls.
    check(code(lambda: ec2.describe_instance_types(DryRun=True)) in (None, "DryRunOperation"),
          "DescribeInstanceTypes(DryRun) answers without an error but DryRunOperation (operator.go:290-299)")
    types = ec2.describe_instance_types(Filters=[{"Name": "supported-virtualization-type", "Values": ["hvm"]},
                                                 {"Name": "processor-info.supported-architecture", "Values": ["x86_64", "arm64"]}],
                                        MaxResults=100)["InstanceTypes"]
    by_name = {t["InstanceType"]: t for t in types}
    check({"m5.large", "m6g.large"} <= by_name.keys() and by_name["m5.large"]["VCpuInfo"]["DefaultVCpus"] == 2,
          f"DescribeInstanceTypes with Karpenter's filters: {len(types)} types")
    offerings = ec2.describe_instance_type_offerings(LocationType="availability-zone", MaxResults=1000)["InstanceTypeOfferings"]
    check({"eu-west-1a", "eu-west-1b"} <= {o["Location"] for o in offerings if o["InstanceType"] == "m5.large"},
          "DescribeInstanceTypeOfferings(availability-zone): m5.large in both zones")
    prices = ec2.describe_spot_price_history(ProductDescriptions=["Linux/UNIX", "Linux/UNIX (Amazon VPC)"],
                                             StartTime=datetime.datetime.now(datetime.timezone.utc), MaxResults=2000)["SpotPriceHistory"]
    check(any(p["InstanceType"] == "m5.large" for p in prices), f"DescribeSpotPriceHistory: {len(prices)} prices")
    state_active = [{"Name": "state", "Values": ["active"]}]  # capacityreservation/types.go:62-100
    found = ec2.describe_capacity_reservations(Filters=state_active + [{"Name": "tag:team", "Values": ["a"]}], MaxResults=500)
    check(found["CapacityReservations"] == [], "DescribeCapacityReservations by tags: none")
    check(code(lambda: ec2.describe_capacity_reservations(Filters=state_active, CapacityReservationIds=["cr-0123456789abcdef0"]))
          == "InvalidCapacityReservationId.NotFound", "DescribeCapacityReservations by ID: InvalidCapacityReservationId.NotFound")

    # The launch template as Karpenter v1.14.3 creates it (launchtemplate/types.go:96-150).
    karpenter_tags = {f"kubernetes.io/cluster/{CLUSTER}": "owned", "karpenter.sh/nodepool": "private",
                      "eks:eks-cluster-name": CLUSTER, "karpenter.k8s.aws/ec2nodeclass": "private",
                      "platform": "socle"}
    lt_name = "karpenter.k8s.aws/1234567890"
    check(code(lambda: ec2.describe_launch_templates(LaunchTemplateNames=[lt_name])) == "InvalidLaunchTemplateName.NotFoundException",
          "DescribeLaunchTemplates of a missing name: InvalidLaunchTemplateName.NotFoundException (Karpenter then creates it)")

    def launch_template(name, spot, profile=f"{CLUSTER}_1234"):
        data_tags = [{"ResourceType": "network-interface", "Tags": tags(karpenter_tags)}]
        if spot:
            data_tags.append({"ResourceType": "spot-instances-request", "Tags": tags(karpenter_tags)})
        ec2.create_launch_template(LaunchTemplateName=name, LaunchTemplateData={
            "BlockDeviceMappings": [{"DeviceName": "/dev/xvda", "Ebs": {"DeleteOnTermination": True, "Encrypted": True,
                                                                        "Iops": 3000, "Throughput": 125, "VolumeSize": 20, "VolumeType": "gp3"}}],
            "IamInstanceProfile": {"Name": profile},
            "Monitoring": {"Enabled": False},
            "UserData": base64.b64encode(b"MIME-Version: 1.0\n").decode(),
            "ImageId": AMI["x86_64"],
            "MetadataOptions": {"HttpEndpoint": "enabled", "HttpProtocolIpv6": "disabled", "HttpPutResponseHopLimit": 1,
                                "HttpTokens": "required", "InstanceMetadataTags": "disabled"},
            "NetworkInterfaces": [{"AssociatePublicIpAddress": False, "DeviceIndex": 0, "Groups": [sg]}],
            "TagSpecifications": data_tags,
            "Placement": {"Tenancy": "default"},
            "EnclaveOptions": {"Enabled": False},
        }, TagSpecifications=[{"ResourceType": "launch-template", "Tags": tags(karpenter_tags)}])

    launch_template(lt_name, spot=False)
    launch_template(lt_name + "1", spot=True)
    found = ec2.describe_launch_templates(Filters=[{"Name": "tag:eks:eks-cluster-name", "Values": [CLUSTER]}], MaxResults=200)["LaunchTemplates"]
    check(sorted(t["LaunchTemplateName"] for t in found) == [lt_name, lt_name + "1"], "DescribeLaunchTemplates by the cluster's tag")

    def fleet_input(name, capacity_type, dry_run=False):
        overrides = [{"InstanceType": it, "SubnetId": subnets[z]["SubnetId"], "ImageId": AMI["x86_64"],
                      "AvailabilityZone": z, "Priority": price}
                     for it, price in [("m5.large", 0.107), ("m5.xlarge", 0.214)] for z in ("eu-west-1b", "eu-west-1a")]
        request = {"Type": "instant", "LaunchTemplateConfigs": [{"LaunchTemplateSpecification": {"LaunchTemplateName": name, "Version": "$Latest"},
                                                                 "Overrides": overrides}],
                   "TargetCapacitySpecification": {"DefaultTargetCapacityType": capacity_type, "TotalTargetCapacity": 1},
                   "TagSpecifications": [{"ResourceType": r, "Tags": tags(karpenter_tags)} for r in ("instance", "volume", "fleet")]}
        if capacity_type == "spot":
            request["SpotOptions"] = {"AllocationStrategy": "price-capacity-optimized"}
        else:
            request["OnDemandOptions"] = {"AllocationStrategy": "lowest-price"}
        if dry_run:
            request["DryRun"] = True
        return request  # instance/types.go:159-248, instance.go:457-571

    # The validation's dry runs launch nothing (controllers/nodeclass/validation.go:268-336).
    check(code(lambda: ec2.create_fleet(**fleet_input(lt_name, "on-demand", dry_run=True))) == "DryRunOperation", "CreateFleet(DryRun): DryRunOperation")
    check(code(lambda: ec2.run_instances(DryRun=True, MinCount=1, MaxCount=1, InstanceType="m5.large",
                                         LaunchTemplate={"LaunchTemplateName": lt_name, "Version": "$Latest"},
                                         NetworkInterfaces=[{"DeviceIndex": 0, "SubnetId": subnets["eu-west-1a"]["SubnetId"]}],
                                         TagSpecifications=[{"ResourceType": r, "Tags": tags(karpenter_tags)} for r in ("instance", "volume", "network-interface")]))
          == "DryRunOperation", "RunInstances(DryRun): DryRunOperation")
    # A template naming a profile IAM does not hold: EC2 refuses the dry run as Karpenter reads it
    # (pkg/errors/errors.go:216-224, 258).
    launch_template(lt_name + "-gone", spot=False, profile="no-such-profile")
    try:
        ec2.run_instances(DryRun=True, MinCount=1, MaxCount=1, InstanceType="m5.large",
                          LaunchTemplate={"LaunchTemplateName": lt_name + "-gone", "Version": "$Latest"},
                          NetworkInterfaces=[{"DeviceIndex": 0, "SubnetId": subnets["eu-west-1a"]["SubnetId"]}])
        refused = None
    except ClientError as e:
        refused = e.response["Error"]
    check(refused is not None and refused["Code"] == "InvalidParameterValue" and "Invalid IAM Instance Profile name" in refused["Message"]
          and "iamInstanceProfile.name is invalid" in refused["Message"], f"RunInstances(DryRun) with an unknown instance profile: {refused}")
    ec2.delete_launch_template(LaunchTemplateName=lt_name + "-gone")
    check(ec2.describe_instances()["Reservations"] == [], "no instance after the dry runs")

    launched = {}
    for capacity_type, name in [("on-demand", lt_name), ("spot", lt_name + "1")]:
        out = ec2.create_fleet(**fleet_input(name, capacity_type))
        got = out["Instances"][0]
        over = got["LaunchTemplateAndOverrides"]["Overrides"]
        iid = got["InstanceIds"][0]
        launched[capacity_type] = iid
        i = ec2.describe_instances(InstanceIds=[iid])["Reservations"][0]["Instances"][0]
        what = f"CreateFleet {capacity_type} {iid}"
        check(i["SubnetId"] == over["SubnetId"] and i["Placement"]["AvailabilityZone"] == over["AvailabilityZone"],
              f"{what}: subnet {i['SubnetId']} and zone {i['Placement']['AvailabilityZone']} of its override")
        zone_id = next(s["AvailabilityZoneId"] for s in subnets.values() if s["SubnetId"] == over["SubnetId"])
        check(i["Placement"].get("AvailabilityZoneId") == zone_id, f"{what}: Placement.AvailabilityZoneId {i['Placement'].get('AvailabilityZoneId')}")
        check(i["InstanceType"] == over["InstanceType"] == got["InstanceType"], f"{what}: type {i['InstanceType']}")
        check(i["ImageId"] == AMI["x86_64"] == over["ImageId"], f"{what}: image {i['ImageId']}")
        check([g["GroupId"] for g in i["SecurityGroups"]] == [sg], f"{what}: security groups {i['SecurityGroups']} are the template's")
        check([g["GroupId"] for g in i["NetworkInterfaces"][0]["Groups"]] == [sg], f"{what}: primary interface's groups")
        check(karpenter_tags.items() <= as_dict(i.get("Tags")).items(), f"{what}: tags {as_dict(i.get('Tags'))}")
        check(i.get("IamInstanceProfile", {}).get("Arn") == profile_arn, f"{what}: instance profile {i.get('IamInstanceProfile')}")
        check(i["MetadataOptions"]["HttpTokens"] == "required", f"{what}: metadata options {i['MetadataOptions']}")
        spot = i.get("SpotInstanceRequestId", "").startswith("sir-") and i.get("InstanceLifecycle") == "spot"
        check(spot == (capacity_type == "spot"), f"{what}: SpotInstanceRequestId {i.get('SpotInstanceRequestId')}, InstanceLifecycle {i.get('InstanceLifecycle')}")

    # Karpenter's List (instance/instance.go:219-265), its tagging, its status checks, its Delete.
    state = {"Name": "instance-state-name", "Values": ["pending", "running", "stopping", "stopped", "shutting-down"]}
    listed = [i["InstanceId"] for r in ec2.describe_instances(Filters=[
        {"Name": "tag-key", "Values": ["karpenter.sh/nodepool"]}, {"Name": "tag-key", "Values": ["karpenter.k8s.aws/ec2nodeclass"]},
        {"Name": "tag:eks:eks-cluster-name", "Values": [CLUSTER]}, state], MaxResults=1000)["Reservations"] for i in r["Instances"]]
    check(sorted(listed) == sorted(launched.values()), f"DescribeInstances as Karpenter lists: {listed}")
    stray = ec2.run_instances(ImageId=AMI["x86_64"], MinCount=1, MaxCount=1, InstanceType="m5.large",
                              SubnetId=subnets["eu-west-1a"]["SubnetId"], TagSpecifications=[{"ResourceType": "instance", "Tags": tags(
                                  {"karpenter.k8s.aws/ec2nodeclass": "private", "eks:eks-cluster-name": CLUSTER})}])["Instances"][0]["InstanceId"]
    listed = [i["InstanceId"] for r in ec2.describe_instances(Filters=[
        {"Name": "tag-key", "Values": ["karpenter.sh/nodepool"]}, {"Name": "tag-key", "Values": ["karpenter.k8s.aws/ec2nodeclass"]},
        {"Name": "tag:eks:eks-cluster-name", "Values": [CLUSTER]}, state], MaxResults=1000)["Reservations"] for i in r["Instances"]]
    check(stray not in listed, "DescribeInstances as Karpenter lists: not an instance without the nodepool tag (filters ANDed)")
    ec2.terminate_instances(InstanceIds=[stray])
    ec2.create_tags(Resources=[launched["on-demand"]], Tags=tags({"Name": "node-1", "karpenter.sh/nodeclaim": "private-abc"}))
    failed = [s["InstanceId"] for f in ("instance-status.status", "system-status.status") for s in
              ec2.describe_instance_status(Filters=[{"Name": f, "Values": ["impaired"]}])["InstanceStatuses"]
              if "failed" in json.dumps(s, default=str)]
    check(failed == [], "DescribeInstanceStatus: no failed check")
    ec2.terminate_instances(InstanceIds=[launched["on-demand"]])
    try:
        left = [i["InstanceId"] for r in ec2.describe_instances(InstanceIds=[launched["on-demand"]], Filters=[state])["Reservations"] for i in r["Instances"]]
    except ClientError as e:
        left = e.response["Error"]["Code"]
    check(left in ([], "InvalidInstanceID.NotFound"), f"a terminated instance is gone for Karpenter's Get: {left}")

    # EKS, whose version and service CIDR Karpenter reads, and the interruption queue.
    eks = client("eks")
    eks.create_cluster(name=CLUSTER, version=K8S, roleArn=f"arn:aws:iam::{ACCOUNT}:role/eks",
                       resourcesVpcConfig={"subnetIds": [s["SubnetId"] for s in subnets.values()]})
    c = eks.describe_cluster(name=CLUSTER)["cluster"]
    check(c["version"] == K8S and c["endpoint"] and c["kubernetesNetworkConfig"]["serviceIpv4Cidr"],
          f"EKS DescribeCluster: version {c['version']}, endpoint, service CIDR {c['kubernetesNetworkConfig']}")
    sqs = client("sqs")
    sqs.create_queue(QueueName=CLUSTER)
    url = sqs.get_queue_url(QueueName=CLUSTER)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"source": "aws.ec2"}))
    msgs = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, VisibilityTimeout=20, WaitTimeSeconds=1,
                               AttributeNames=["SentTimestamp"], MessageAttributeNames=["All"]).get("Messages", [])
    check(len(msgs) == 1, "SQS GetQueueUrl, ReceiveMessage")
    for m in msgs:
        sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])


def main():
    with tempfile.TemporaryDirectory() as tmp:
        proc, endpoint = start(tmp)
        try:
            run(endpoint)
        except Exception as e:  # an unexpected error is a wrong answer too
            check(False, f"{type(e).__name__}: {e}")
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                rc = proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                rc = "none (killed)"
            check(rc == 0, f"launch.py exits 0 on SIGTERM: {rc}")
            if failures:
                print("--- launch.py's log ---\n" + open(os.path.join(tmp, "moto.log")).read()[-20000:])
    if failures:
        print(f"{len(failures)} wrong answer(s)")
        sys.exit(1)
    print("all answers right")


if __name__ == "__main__":
    main()
