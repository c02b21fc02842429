// Command runtime-image builds the function's runtime image without Docker: for each
// static binary named on the command line, a one-layer image on an empty base with
// the same user, port and entrypoint as the Dockerfile's distroless image. Each image
// is written as its own tarball, the form `crossplane xpkg build
// --embed-runtime-image-tarball` loads (one image per file, so one package per
// platform; `crossplane xpkg push -f a.xpkg,b.xpkg` joins them in an index).
//
//	runtime-image -o DIR [-version V] [-source URL] linux/amd64=BIN linux/arm64=BIN
//
// writes DIR/runtime-linux-amd64.tar and DIR/runtime-linux-arm64.tar. The output is
// reproducible: the same binaries and flags give the same image digests.
package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// What the Dockerfile's final stage sets; test/package checks both stay equal.
const (
	binaryPath = "/function"
	user       = "65532:65532"
	port       = "9443/tcp"
)

// The ELF machine a binary must be built for, per GOARCH.
var machines = map[string]elf.Machine{
	"amd64": elf.EM_X86_64,
	"arm64": elf.EM_AARCH64,
}

func main() {
	out := flag.String("o", "", "directory the image tarballs are written to")
	version := flag.String("version", "", "org.opencontainers.image.version label")
	source := flag.String("source", "", "org.opencontainers.image.source label")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: runtime-image -o DIR [-version V] [-source URL] OS/ARCH=BINARY...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if *out == "" || flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}

	labels := map[string]string{}
	if *version != "" {
		labels["org.opencontainers.image.version"] = *version
	}
	if *source != "" {
		labels["org.opencontainers.image.source"] = *source
	}

	for _, arg := range flag.Args() {
		platform, binary, ok := strings.Cut(arg, "=")
		if !ok {
			fail(fmt.Errorf("cannot parse %q: want OS/ARCH=BINARY", arg))
		}
		path, err := write(*out, platform, binary, labels)
		if err != nil {
			fail(err)
		}
		fmt.Println(path)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "runtime-image:", err)
	os.Exit(1)
}

// write builds the image of one platform and writes it to DIR/runtime-OS-ARCH.tar.
func write(dir, platform, binary string, labels map[string]string) (string, error) {
	p, err := v1.ParsePlatform(platform)
	if err != nil {
		return "", fmt.Errorf("cannot parse platform %q: %w", platform, err)
	}
	if err := checkStatic(binary, p); err != nil {
		return "", err
	}
	img, err := build(binary, p, labels)
	if err != nil {
		return "", fmt.Errorf("cannot build the %s image: %w", platform, err)
	}
	id := p.OS + "-" + p.Architecture
	tag, err := name.NewTag("function-karpenter-runtime:" + id)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "runtime-"+id+".tar")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := tarball.WriteToFile(path, tag, img); err != nil {
		return "", fmt.Errorf("cannot write %q: %w", path, err)
	}
	return path, nil
}

// checkStatic refuses a binary built for another machine or linked dynamically: on an
// empty base there is no loader and no libc, so such a binary would fail only at start.
func checkStatic(binary string, p *v1.Platform) error {
	want, ok := machines[p.Architecture]
	if p.OS != "linux" || !ok {
		return fmt.Errorf("unsupported platform %q", p)
	}
	f, err := elf.Open(binary)
	if err != nil {
		return fmt.Errorf("cannot read %q as an ELF binary: %w", binary, err)
	}
	defer f.Close()
	if f.Machine != want {
		return fmt.Errorf("%q is built for %s, not %s", binary, f.Machine, p)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Errorf("%q is dynamically linked: build it with CGO_ENABLED=0", binary)
		}
	}
	return nil
}

// build returns the image: one layer holding the binary (root-owned, 0755, as
// Docker's COPY leaves it) and the config the Dockerfile declares. Every timestamp is
// the Unix epoch, so identical binaries give identical digests.
func build(binary string, p *v1.Platform, labels map[string]string) (v1.Image, error) {
	data, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{
		Name:     strings.TrimPrefix(binaryPath, "/"),
		Mode:     0o755,
		Size:     int64(len(data)),
		Typeflag: tar.TypeReg,
		ModTime:  time.Unix(0, 0),
		Format:   tar.FormatPAX,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layerTar := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return nil, err
	}

	img, err := mutate.Append(empty.Image, mutate.Addendum{
		Layer:   layer,
		History: v1.History{CreatedBy: "runtime-image: COPY function " + binaryPath, Created: v1.Time{Time: time.Unix(0, 0)}},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS = p.OS
	cf.Architecture = p.Architecture
	cf.Created = v1.Time{Time: time.Unix(0, 0)}
	cf.Config = v1.Config{
		Entrypoint:   []string{binaryPath},
		User:         user,
		ExposedPorts: map[string]struct{}{port: {}},
		Labels:       labels,
	}
	return mutate.ConfigFile(img, cf)
}
