package versions

import (
	"strings"
	"testing"
)

// TestCheckUpgrade: no downgrade but within a minor whose CRDs are the
// same, and no jump over a version's upgrade floor. No known version has a floor yet, so one is added for the test.
func TestCheckUpgrade(t *testing.T) {
	known := All
	t.Cleanup(func() { All = known })
	// 1.15.9, a 1.15 patch whose CRDs differ from 1.15.0's and 1.15.2's.
	changed := v1_15_0.Patch("1.15.9")
	changed.CRDs = "another"
	All = append(append([]Version{}, known...), changed, Version{Version: "1.16.0", Chart: "1.16.0", UpgradeFrom: "1.15.0"})

	for _, tc := range []struct {
		from, to string
		want     string // in the error; empty: allowed
	}{
		{from: "1.14.1", to: "1.14.1"},
		{from: "1.14.1", to: "1.15.0"},
		{from: "1.15.0", to: "1.16.0"},
		{from: "1.15.0", to: "1.14.1", want: "a downgrade is refused"},
		{from: "1.14.1", to: "1.16.0", want: "Karpenter 1.16.0 may be upgraded to from 1.15.0 or later, not from 1.14.1: upgrade through 1.15.0 first"},
		{from: "1.9.0", to: "1.14.1"}, // semver order, not string order
		// Back within a minor whose CRDs are the same, byte for byte.
		{from: "1.15.2", to: "1.15.0"},
		{from: "1.14.3", to: "1.14.1"},
		{from: "1.15.9", to: "1.15.2", want: "a downgrade is refused"},
		{from: "1.16.0", to: "1.15.2", want: "a downgrade is refused"},
	} {
		err := CheckUpgrade(tc.from, tc.to)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s → %s: refused (%v), want allowed", tc.from, tc.to, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s → %s: %v, want an error saying %q", tc.from, tc.to, err, tc.want)
		}
	}
}

// TestKnownInOrder: the table lists versions oldest first, each once.
func TestKnownInOrder(t *testing.T) {
	for i := 1; i < len(All); i++ {
		if Compare(All[i-1].Version, All[i].Version) >= 0 {
			t.Errorf("%s comes before %s in the table", All[i-1].Version, All[i].Version)
		}
	}
}

// TestEachVersionReadsItsOwnRelease: every entry's chart and CRDs are its
// own release's, so a patch entry is never silently tested as its minor's
// first release.
func TestEachVersionReadsItsOwnRelease(t *testing.T) {
	for _, v := range All {
		if v.Chart != v.Version || v.Module != karpenterModule+"@v"+v.Version {
			t.Errorf("Karpenter %s installs chart %s and is checked against %s", v.Version, v.Chart, v.Module)
		}
	}
}
