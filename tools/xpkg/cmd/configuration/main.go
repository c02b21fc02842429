// Command configuration stages the Configuration package's root for one registry:
// the root crossplane.yaml and the API files (XRD, Compositions), with the function
// dependency pointing at REGISTRY/function-karpenter and every Composition's
// functionRef renamed to match.
//
//	configuration -function-package REGISTRY/function-karpenter -o DIR crossplane.yaml apis/*.yaml
//
// The renaming is needed because Crossplane names the Function it installs for a
// dependency after the package's repository path (xpkg.crossplane.io/do-now/function-karpenter
// becomes do-now-function-karpenter), so a Configuration pushed to another organisation
// needs Compositions calling that other name. The committed files hold the canonical
// package and name; anything else found in them is refused rather than guessed at.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"gopkg.in/yaml.v3"
)

func main() {
	pkg := flag.String("function-package", "", "where the function package is pushed, without tag (REGISTRY/function-karpenter)")
	out := flag.String("o", "", "directory to write the staged package root to")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: configuration -function-package REF -o DIR META OBJECTS...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *pkg == "" || *out == "" || flag.NArg() < 2 {
		flag.Usage()
		os.Exit(2)
	}
	if err := stage(*pkg, *out, flag.Arg(0), flag.Args()[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "configuration:", err)
		os.Exit(1)
	}
}

func stage(pkg, out, metaFile string, objectFiles []string) error {
	meta, err := readDocs(metaFile)
	if err != nil {
		return err
	}
	if len(meta) != 1 {
		return fmt.Errorf("%s: want one document, got %d", metaFile, len(meta))
	}
	from, err := rewriteDependency(meta[0], pkg)
	if err != nil {
		return fmt.Errorf("%s: %w", metaFile, err)
	}
	oldName, err := FunctionName(from)
	if err != nil {
		return err
	}
	newName, err := FunctionName(pkg)
	if err != nil {
		return err
	}

	staged := map[string][]map[string]any{filepath.Join(out, "crossplane.yaml"): meta}
	refs := 0
	for _, f := range objectFiles {
		docs, err := readDocs(f)
		if err != nil {
			return err
		}
		for _, d := range docs {
			n, err := renameFunctionRefs(d, oldName, newName)
			if err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			refs += n
		}
		dst := filepath.Join(out, filepath.Base(f))
		if _, dup := staged[dst]; dup {
			return fmt.Errorf("two files named %s", filepath.Base(f))
		}
		staged[dst] = docs
	}
	if refs == 0 {
		return fmt.Errorf("no Composition step calls %q, the name Crossplane gives the dependency %s", oldName, from)
	}

	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for f, docs := range staged {
		if err := writeDocs(f, docs); err != nil {
			return err
		}
	}
	return nil
}

// rewriteDependency points the Function dependency whose repository ends like pkg
// at pkg, and returns the package it pointed at before.
func rewriteDependency(meta map[string]any, pkg string) (string, error) {
	spec, _ := meta["spec"].(map[string]any)
	deps, _ := spec["dependsOn"].([]any)
	var found map[string]any
	for _, d := range deps {
		dep, _ := d.(map[string]any)
		p, _ := dep["package"].(string)
		if dep["kind"] != "Function" || path.Base(p) != path.Base(pkg) {
			continue
		}
		if found != nil {
			return "", fmt.Errorf("two Function dependencies named %s", path.Base(pkg))
		}
		found = dep
	}
	if found == nil {
		return "", fmt.Errorf("no Function dependency named %s in spec.dependsOn", path.Base(pkg))
	}
	from := found["package"].(string)
	found["package"] = pkg
	return from, nil
}

// renameFunctionRefs renames, in a Composition, the pipeline steps' functionRefs
// named from, and refuses steps calling an unknown function.
func renameFunctionRefs(obj map[string]any, from, to string) (int, error) {
	if obj["kind"] != "Composition" {
		return 0, nil
	}
	spec, _ := obj["spec"].(map[string]any)
	steps, _ := spec["pipeline"].([]any)
	n := 0
	for _, s := range steps {
		step, _ := s.(map[string]any)
		ref, _ := step["functionRef"].(map[string]any)
		if ref["name"] != from {
			return 0, fmt.Errorf("step %v calls function %v, but the only function dependency is installed as %q", step["step"], ref["name"], from)
		}
		ref["name"] = to
		n++
	}
	return n, nil
}

// FunctionName is the name Crossplane gives the Function it installs for a
// dependency on pkg: its repository path as a DNS label (Crossplane v2.2.1,
// internal/xpkg.ToDNSLabel applied to the reference's RepositoryStr).
func FunctionName(pkg string) (string, error) {
	repo, err := name.NewRepository(pkg, name.StrictValidation)
	if err != nil {
		return "", fmt.Errorf("cannot parse package %q: %w", pkg, err)
	}
	return toDNSLabel(repo.RepositoryStr()), nil
}

// toDNSLabel is Crossplane's ToDNSLabel: keep [a-z0-9], turn . / : - into -, stop at
// 63 characters, trim dashes.
func toDNSLabel(s string) string {
	var b strings.Builder
	for i := range len(s) {
		c := s[i]
		if ('a' <= c && c <= 'z') || ('0' <= c && c <= '9') {
			b.WriteByte(c)
		}
		if (c == '.' || c == '/' || c == ':' || c == '-') && i != 0 && i != 62 && i != len(s)-1 {
			b.WriteByte('-')
		}
		if i == 62 {
			break
		}
	}
	return strings.Trim(b.String(), "-")
}

func readDocs(file string) ([]map[string]any, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var docs []map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var d map[string]any
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("cannot parse %s: %w", file, err)
		}
		if d != nil {
			docs = append(docs, d)
		}
	}
}

func writeDocs(file string, docs []map[string]any) error {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	for _, d := range docs {
		if err := enc.Encode(d); err != nil {
			return err
		}
	}
	if err := enc.Close(); err != nil {
		return err
	}
	return os.WriteFile(file, buf.Bytes(), 0o644)
}
