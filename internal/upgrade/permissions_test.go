package upgrade

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestUnion checks the policy a running controller keeps while it moves:
// the new document's statements, then the old ones it drops, a Sid that
// would appear twice dropped from the kept statement.
func TestUnion(t *testing.T) {
	held := `{"Version":"2012-10-17","Statement":[
		{"Sid":"A","Effect":"Allow","Action":["ec2:DescribeImages"],"Resource":"*"},
		{"Sid":"Reboot","Effect":"Allow","Action":["ec2:RebootInstances"],"Resource":"*"},
		{"Sid":"B","Effect":"Allow","Action":["iam:GetRole"],"Resource":"arn:old"}]}`
	want := `{"Version":"2012-10-17","Statement":[
		{"Sid":"A","Effect":"Allow","Action":["ec2:DescribeImages"],"Resource":"*"},
		{"Sid":"B","Effect":"Allow","Action":["iam:GetRole"],"Resource":"arn:new"}]}`
	got, err := union(held, want)
	if err != nil {
		t.Fatal(err)
	}
	var doc, expected any
	if err := json.Unmarshal([]byte(got), &doc); err != nil {
		t.Fatalf("union is not JSON: %v\n%s", err, got)
	}
	_ = json.Unmarshal([]byte(`{"Version":"2012-10-17","Statement":[
		{"Sid":"A","Effect":"Allow","Action":["ec2:DescribeImages"],"Resource":"*"},
		{"Sid":"B","Effect":"Allow","Action":["iam:GetRole"],"Resource":"arn:new"},
		{"Sid":"Reboot","Effect":"Allow","Action":["ec2:RebootInstances"],"Resource":"*"},
		{"Effect":"Allow","Action":["iam:GetRole"],"Resource":"arn:old"}]}`), &expected)
	if diff := cmp.Diff(expected, doc); diff != "" {
		t.Errorf("union -want +got:\n%s", diff)
	}

	u, _ := parsePolicy(got)
	ws, _ := parsePolicy(want)
	if !covers(u.keys(), ws.keys()) {
		t.Errorf("the union lacks statements of the new policy: %s", got)
	}
	old, _ := parsePolicy(held)
	if !covers(u.keys(), old.keys()) {
		t.Errorf("the union lacks statements the running controller has: %s", got)
	}
	if again, _ := union(got, want); again != got {
		t.Errorf("the union of the union and the new policy moved:\n%s\n%s", got, again)
	}
}
