package ami

import (
	"slices"
	"strings"
	"testing"
)

// TestReleasesHoldTheChangelog holds releases.txt to facts of the
// awslabs/amazon-eks-ami CHANGELOG it was generated from: the release
// before and after the pin main once defaulted to, and the first release
// that published Kubernetes 1.35 AMIs.
func TestReleasesHoldTheChangelog(t *testing.T) {
	if err := Check(Prefix+"v20251117", "", nil); err == nil || !strings.Contains(err.Error(), "the releases around it are v20251112 and v20251120") {
		t.Errorf("al2023@v20251117: %v, want it refused as no release, between v20251112 and v20251120", err)
	}
	first := ""
	for _, r := range Releases {
		if slices.Contains(r.Minors["x86_64"], "1.35") && slices.Contains(r.Minors["arm64"], "1.35") {
			first = r.Name
			break
		}
	}
	if first != "v20260114" {
		t.Errorf("the first release serving Kubernetes 1.35 is %q in releases.txt, want v20260114", first)
	}
	for i := 1; i < len(Releases); i++ {
		if Releases[i-1].Name >= Releases[i].Name {
			t.Errorf("releases.txt is not sorted: %s before %s", Releases[i-1].Name, Releases[i].Name)
		}
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		alias, minor string
		archs        []string
		want         string // in the error; empty: accepted
	}{
		{alias: Prefix + "v20260114", minor: "1.35", archs: []string{"arm64", "amd64"}},
		{alias: Prefix + "v20251120", minor: "1.35", archs: []string{"arm64"}, want: "serves no Kubernetes 1.35 AMI for arm64 (release v20251120 serves 1.29 to 1.34)"},
		{alias: Prefix + "v20260403", minor: "1.29", archs: []string{"amd64"}, want: "serves no Kubernetes 1.29 AMI for amd64 (release v20260403 serves 1.30 to 1.35)"},
		{alias: Prefix + "v20231230", want: "older than every EKS-optimized AL2023 release the function knows (the oldest is v20240213)"},
		{alias: Prefix + "v20991231", minor: "1.40", archs: []string{"amd64"}}, // newer than known: the preflight resolves it
		{alias: Latest, minor: "1.35", archs: []string{"amd64"}},
		{alias: "al2@v20260714", want: "is not an AL2023 alias"},
	} {
		err := Check(tc.alias, tc.minor, tc.archs)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s %s: refused (%v)", tc.alias, tc.minor, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s %s: %v, want %q", tc.alias, tc.minor, err, tc.want)
		}
	}
}
