package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// header reads the source releases.txt records.
var header = regexp.MustCompile(`blob/([0-9a-f]{40})/CHANGELOG\.md\n# \(commit of ([0-9-]{10}), read on ([0-9-]{10})\)`)

// TestReleasesAreGenerated holds internal/ami/releases.txt to what this
// generator writes for the AMI names it lists and the source it records:
// a changelog naming exactly those AMIs gives the file back, byte for byte.
// So the committed file is the generator's output, not an edit of it;
// `make check-ami-releases` holds it to the recorded CHANGELOG itself,
// where a copy of the repository is at hand.
func TestReleasesAreGenerated(t *testing.T) {
	b, err := os.ReadFile("../../internal/ami/releases.txt")
	if err != nil {
		t.Fatal(err)
	}
	committed := string(b)
	m := header.FindStringSubmatch(committed)
	if m == nil {
		t.Fatal("releases.txt records no commit, commit date and read date of its source")
	}
	var names strings.Builder
	for _, line := range strings.Split(committed, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 || strings.HasPrefix(line, "#") {
			continue
		}
		for _, minor := range f[2:] {
			names.WriteString("- amazon-eks-node-al2023-" + f[1] + "-standard-" + minor + "-" + f[0] + "\n")
		}
	}
	var got strings.Builder
	if err := write(&got, names.String(), source{commit: m[1], date: m[2], read: m[3]}); err != nil {
		t.Fatal(err)
	}
	if got.String() != committed {
		t.Errorf("releases.txt is not what hack/amireleases writes for its own releases; regenerate it (make ami-releases)\ngot:\n%.600s", got.String())
	}
}

// TestWriteReadsAMINames: the AMI names of a CHANGELOG, in any order and
// repeated, give one line per release and architecture, minors in
// version order (1.9 before 1.10); names of other AMI families are not
// releases of this one.
func TestWriteReadsAMINames(t *testing.T) {
	changelog := `## v20260714
| amazon-eks-node-al2023-x86_64-standard-1.10-v20260714 | amazon-eks-node-al2023-x86_64-standard-1.9-v20260714 |
amazon-eks-node-al2023-arm64-standard-1.9-v20260714 amazon-eks-node-al2023-x86_64-nvidia-1.9-v20260714
amazon-eks-node-al2023-x86_64-standard-1.9-v20260714 amazon-eks-node-1.9-v20260101
`
	var got strings.Builder
	if err := write(&got, changelog, source{"c", "d", "r"}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(got.String()), "\n")
	want := []string{"v20260714 arm64 1.9", "v20260714 x86_64 1.9 1.10"}
	if len(lines) != 4+len(want) || strings.Join(lines[4:], "|") != strings.Join(want, "|") {
		t.Errorf("got\n%s\nwant releases %v", got.String(), want)
	}
	if err := write(&got, "nothing", source{}); err == nil {
		t.Error("a changelog without an AMI name gave releases")
	}
}
