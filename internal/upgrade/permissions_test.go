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

	_, hs := statements(got)
	_, ws := statements(want)
	if m := missing(hs, ws); len(m) != 0 {
		t.Errorf("the union lacks statements of the new policy: %v", m)
	}
	_, old := statements(held)
	if m := missing(hs, old); len(m) != 0 {
		t.Errorf("the union lacks statements the running controller has: %v", m)
	}
	if again, _ := union(got, want); again != got {
		t.Errorf("the union of the union and the new policy moved:\n%s\n%s", got, again)
	}
}
