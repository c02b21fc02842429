package flux

import (
	"archive/zip"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path"
	"strings"
	"sync"
	"testing"
)

// module is a Go module whose zip carries files the tests read (CRDs, the
// Karpenter chart) but whose code they never import. Its hash is pinned, so
// the tests know exactly what they read.
type module struct {
	Path, Version, Sum string
}

// karpenterSums pin the zips of the Karpenter modules internal/versions
// names for each version (its CRDs, chart and source); a version whose modules
// have no sum here fails the tests until one is added.
var karpenterSums = map[string]string{
	"github.com/aws/karpenter-provider-aws@v1.14.1": "h1:WGtIQTQcxpElYMdWfWuPwaF2+9muR+hYhPZsTtoY8Gs=",
	"github.com/aws/karpenter-provider-aws@v1.14.3": "h1:XS61hMCoPL0sXWh5JtJeyTCZLN5Y1So1uNU70pmLccY=",
	"github.com/aws/karpenter-provider-aws@v1.15.0": "h1:3qnrxRxKHPg9Hd71D7xH4xKxPfmcrB30EFBrMz74mOs=",
	"github.com/aws/karpenter-provider-aws@v1.15.2": "h1:RGw64PB2ROUHZIUhBqjO78l3zJ9YctnWeullrr4cxYI=",
}

// karpenterModule is the pinned Karpenter module ref (path@version), which
// carries Karpenter's CRDs (pkg/apis/crds) and the chart of the release
// before it (charts/karpenter).
func karpenterModule(t *testing.T, ref string) module {
	t.Helper()
	path, version, ok := strings.Cut(ref, "@")
	sum, pinned := karpenterSums[ref]
	if !ok || !pinned {
		t.Fatalf("no pinned hash of %s in karpenterSums", ref)
	}
	return module{path, version, sum}
}

var (
	// helmController and sourceController carry the Flux CRDs of the Flux
	// release whose kustomize-controller (v1.7) the function targets.
	helmController   = module{"github.com/fluxcd/helm-controller", "v1.4.0", "h1:rkm8rmB6Na7eNc4pJOnvtXEaJ19iKluRtayHKjBxcUM="}
	sourceController = module{"github.com/fluxcd/source-controller", "v1.7.0", "h1:/fBgS4CSmT5Jj/fjQDF92y+pC3gst1GJjgNSzY8Ff9I="}
)

var (
	zipsMu sync.Mutex
	zips   = map[module]*zip.ReadCloser{}
)

// files returns the module's files under dir (a slash-separated path inside
// the module), keyed by their path relative to dir.
//
// The module is fetched with go mod download, which downloads its zip through
// the module proxy and verifies it against the checksum database. The zip is
// read in place rather than from the extracted directory: Karpenter v1.15.0
// declares go 1.26.9, and an older local toolchain refuses to extract it (go
// mod download then exits non-zero, after the verified zip is in the cache).
func (m module) files(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	prefix := m.Path + "@" + m.Version + "/"
	if d := strings.Trim(dir, "/"); d != "" && d != "." {
		prefix += d + "/"
	}
	out := map[string][]byte{}
	for _, f := range m.zip(t).File {
		if !strings.HasPrefix(f.Name, prefix) || strings.HasSuffix(f.Name, "/") {
			continue
		}
		out[strings.TrimPrefix(f.Name, prefix)] = readZipFile(t, f)
	}
	if len(out) == 0 {
		t.Fatalf("%s@%s has no files under %s", m.Path, m.Version, dir)
	}
	return out
}

// file returns one file of the module.
// readZipFile is the content of one file of a module's zip.
func readZipFile(t *testing.T, f *zip.File) []byte {
	t.Helper()
	r, err := f.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (m module) file(t *testing.T, name string) []byte {
	t.Helper()
	b, ok := m.files(t, path.Dir(name))[path.Base(name)]
	if !ok {
		t.Fatalf("%s@%s has no file %s", m.Path, m.Version, name)
	}
	return b
}

func (m module) zip(t *testing.T) *zip.ReadCloser {
	t.Helper()
	zipsMu.Lock()
	defer zipsMu.Unlock()
	if z, ok := zips[m]; ok {
		return z
	}
	ref := m.Path + "@" + m.Version
	cmd := exec.Command("go", "mod", "download", "-json", ref)
	// Never switch toolchains for a module that wants a newer Go: only its
	// zip is needed.
	cmd.Env = append(os.Environ(), "GOTOOLCHAIN=local")
	out, runErr := cmd.Output()
	var info struct{ Zip, Sum, Error string }
	if err := json.Unmarshal(out, &info); err != nil || info.Zip == "" {
		t.Fatalf("go mod download %s: no zip (%v, %v): %s", ref, runErr, err, out)
	}
	if info.Sum != m.Sum {
		t.Fatalf("go mod download %s: hash %s, want %s", ref, info.Sum, m.Sum)
	}
	z, err := zip.OpenReader(info.Zip)
	if err != nil {
		t.Fatalf("cannot open the zip of %s: %v", ref, err)
	}
	zips[m] = z
	return z
}
