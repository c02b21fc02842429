package pkgtest

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// obj is a parsed YAML document, compared as data.
type obj = map[string]any

// repoRoot is the repository's root: REPO_ROOT when make sets it, else two levels up.
func repoRoot(t *testing.T) string {
	t.Helper()
	if r := os.Getenv("REPO_ROOT"); r != "" {
		return r
	}
	r, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// readRepoFile reads a file of the repository.
func readRepoFile(t *testing.T, rel string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// repoDocs parses every YAML document of a repository file.
func repoDocs(t *testing.T, rel string) []obj {
	t.Helper()
	docs, err := parseDocs(readRepoFile(t, rel))
	if err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	return docs
}

// repoDoc parses a repository file holding one YAML document.
func repoDoc(t *testing.T, rel string) obj {
	t.Helper()
	docs := repoDocs(t, rel)
	if len(docs) != 1 {
		t.Fatalf("%s: want one YAML document, got %d", rel, len(docs))
	}
	return docs[0]
}

// parseDocs parses a YAML stream into documents, skipping empty ones. Both sides of every
// comparison go through it, so values compare as data whatever the formatting.
func parseDocs(data []byte) ([]obj, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var docs []obj
	for {
		var o obj
		err := dec.Decode(&o)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(o) > 0 {
			docs = append(docs, o)
		}
	}
}

// str reads a string at a dotted path of an object, "" when absent.
func str(o obj, path string) string {
	v, _ := get(o, path).(string)
	return v
}

// get reads the value at a dotted path of an object, nil when absent.
func get(o obj, path string) any {
	var v any = o
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// list reads the objects of a list at a dotted path.
func list(o obj, path string) []obj {
	var out []obj
	items, _ := get(o, path).([]any)
	for _, i := range items {
		if m, ok := i.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}
