package config

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/structpb"

	"github.com/do-now/function-karpenter/internal/naming"
)

// FuzzLoad feeds arbitrary XR specs and inputs to Load: it must never panic,
// every error must name a field under spec or input, and whatever it accepts
// must fit AWS's limits and carry no character a policy could be tricked by.
func FuzzLoad(f *testing.F) {
	f.Add(`{"cluster":{"name":"prod-eu","region":"eu-west-3"},"nodeIdentity":{"roleArn":"arn:aws:iam::123456789012:role/n","instanceProfile":"n"}}`, `{}`)
	f.Add(`{"cluster":{"name":"a\"b","region":"eu-west-3"},"nodeIdentity":{"roleArn":"arn:aws:iam::123456789012:role/*","instanceProfile":"*"}}`, `{"iamPathPrefix":"/a*/"}`)
	f.Add(`{"cluster":{"name":5},"pools":{"private":{"limits":{"cpu":"-1","memory":"1e3Ti"}}}}`, `{"tenancy":{"clusters":[{"name":"x","account":"1"}]}}`)
	f.Add(`{"pools":{"public":{"enabled":false,"architectures":[]}}}`, `{"nodes":{"publicSecurityGroupSuffix":""},"tags":{"aws:x":"y"}}`)
	f.Fuzz(func(t *testing.T, specJSON, inputJSON string) {
		var spec map[string]any
		if json.Unmarshal([]byte(specJSON), &spec) != nil {
			return
		}
		var in *structpb.Struct
		var fields map[string]any
		if json.Unmarshal([]byte(inputJSON), &fields) == nil {
			s, err := structpb.NewStruct(fields)
			if err != nil {
				return
			}
			in = s
		}
		c, errs := Load(owner, spec, in)
		for _, e := range errs {
			if !strings.HasPrefix(e.Field, "spec") && !strings.HasPrefix(e.Field, "input") {
				t.Errorf("error without a spec or input field path: %v", e)
			}
		}
		if len(errs) > 0 {
			if c != nil {
				t.Errorf("Load returned a config along with errors %v", errs)
			}
			return
		}
		if len(c.Names.Role) > naming.MaxRoleName || len(c.Names.Queue) > naming.MaxQueueName {
			t.Errorf("accepted names over AWS limits: %+v", c.Names)
		}
		for key, rule := range c.Names.Rules {
			if len(rule) > naming.MaxRuleName {
				t.Errorf("accepted rule %s's name %q over AWS's limit of %d", key, rule, naming.MaxRuleName)
			}
		}
		for _, s := range []string{c.Spec.Cluster.Name, c.Spec.Cluster.Region, c.Spec.NodeIdentity.RoleARN, c.Spec.NodeIdentity.InstanceProfile} {
			if strings.ContainsAny(s, "\"*?\\ \n") || !utf8.ValidString(s) {
				t.Errorf("accepted %q, which could change a policy's meaning", s)
			}
		}
	})
}
