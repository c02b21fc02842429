# function-karpenter. The two commands a fresh machine needs (Go, git, make
# and gcc are enough; everything else is built from the Go module proxy and
# cached under .cache/):
#   make render   renders the example claim through every step of the sequence
#   make test     runs every test
.DEFAULT_GOAL := render

# One set of build flags for every go command make runs (vet, test, run, generate and the tools'
# builds), the flags the function ships with: Go's build cache keys a compiled
# package on -trimpath and, through the cgo build tag, on CGO_ENABLED (go1.26.8
# src/cmd/go/internal/work/exec.go, buildActionID). With two sets, the function's dependencies and
# the standard library compiled once for the tests and again for the package and the suite's
# function. -trimpath also keys a package from the module cache on its module and version, not its
# folder, so a clone anywhere reuses the cache.
export CGO_ENABLED := 0
# -gcflags=all=-dwarf=false: the compiler writes no DWARF (go1.26.8 src/cmd/compile/internal/base/
# flag.go, Flag.Dwarf, "generate DWARF symbols"). The function and the tools are linked with -s -w,
# and -w drops it anyway (src/cmd/link/internal/ld/main.go, "disable DWARF generation"); the tests
# need none: stack traces and runtime/pprof's symbols come from the pcln table (src/runtime/
# symtab.go, CallersFrames; src/runtime/pprof/proto.go). Building ./fn into an empty cache took
# 214 s with DWARF and 185 s without (docs/performance.md). A debugger needs DWARF: build outside
# make for one.
# GOFLAGS keeps what the environment or `go env -w` set (an exported GOFLAGS hides go env's file).
# The recipes below and in hack/ rely on these and do not repeat them.
export GOFLAGS := -trimpath -gcflags=all=-dwarf=false $(filter-out -trimpath,$(shell go env GOFLAGS))

include hack/tools.mk
include hack/package.mk
include hack/e2e.mk

OUTPUT := $(CURDIR)/_output
GO_TEST_FLAGS ?= -count=1
# Each go test of make test runs after a go vet of the same packages (unit's covers the e2e
# stand-in for AWS), so it runs with -vet=off: go vet runs every analyzer go test runs (and
# more), and Go caches the facts vet computes about each dependency under the set of analyzers
# asked for (go1.26.8 src/cmd/go/internal/work/exec.go, "vetflags"). With both, a cold run
# analysed every dependency twice.
GO_TEST_VETTED := -vet=off

# Environment the render tests read.
RENDER_ENV = CROSSPLANE=$(CROSSPLANE) VALIDATE_FLAGS="$(VALIDATE_FLAGS)" PROVIDER_AWS_CRDS=$(PROVIDER_AWS_CRDS) \
  PROVIDER_KUBERNETES_CRDS=$(PROVIDER_KUBERNETES_CRDS) FLUX_KUSTOMIZE_CRDS=$(FLUX_KUSTOMIZE_CRDS) K8S_SCHEMAS=$(K8S_SCHEMAS) \
  K8S_SCHEMA_KINDS="$(K8S_SCHEMA_KINDS)"

.PHONY: render
render: $(CROSSPLANE) ## Render examples/xr.yaml through every step into _output/render/.
	bash hack/render.sh $(CROSSPLANE) $(OUTPUT)/render

.PHONY: build
build: ## Build the function binary.
	go build -o $(OUTPUT)/function ./fn

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Regenerate deepcopy, the XRD and the input CRD from apis/.
	CONTROLLER_GEN=$(CONTROLLER_GEN) go generate ./apis/...

.PHONY: check-modules
check-modules: ## Fail when two of the project's Go modules (the function, e2e, test/flux, test/package, tools/xpkg, and the wrappers of the Crossplane CLI, core and controller-gen) build one module at two versions (each would compile everything above it twice).
	hack/check-module-versions.sh

.PHONY: docs-test
docs-test: ## Every relative link and anchor of the README and docs/, and every alert's runbook_url, resolves.
	go run ./hack/linkcheck -repo https://github.com/do-now/function-karpenter/blob/main/ README.md docs examples/gitops/monitoring/prometheusrule.yaml

.PHONY: check-generated
check-generated: generate ## Fail when the committed generated files differ from apis/.
	@if [ -n "$$(git status --porcelain -- apis package examples/gitops/monitoring docs/reference.md)" ]; then \
	  echo "generated files are stale or hand-edited; run make generate and commit:" >&2; \
	  git status --porcelain -- apis package examples/gitops/monitoring docs/reference.md >&2; git --no-pager diff -- apis package examples/gitops/monitoring docs/reference.md | head -50 >&2; exit 1; fi

# make test builds every binary its later targets run (the end-to-end control plane's, the
# Crossplane CLI and promtool) in the background, in two lanes (test-tools), while it checks the
# generated files and the links and runs the unit tests, which need none of them; then it runs the
# rest. Cold, the builds keep both cores busy for most of the run (docs/performance.md, "A cold
# make test"). The build's output is printed once it is done. The fuzz targets are not run (their
# seed corpora are, by the unit tests): fuzzing builds every package the targets import again,
# instrumented: 10 minutes of a cold make test, beside a build, for 24 seconds of fuzzing (`make fuzz`).
TEST_TOOLS_LOG = $(CACHE)/test-tools.log
# Then the end-to-end suite runs, and beside it, at a lower CPU priority (nice), the render,
# package and Flux tests: the suite's shards spend their half hour mostly waiting on Crossplane's
# and the providers' poll intervals, and leave the cores idle part of it, which those tests fill (a
# cold make test ran them alone, after the binaries, for 7 of its 78 minutes). Their output is
# printed when they end.
TEST_BESIDE_LOG = $(CACHE)/test-beside-e2e.log
# The render, package and Flux tests' timeout (-timeout): go test's default, 10 minutes, is too
# short beside the suite, which leaves them a small share of the cores. Cold, the render tests
# take about 2 minutes alone (docs/performance.md); beside the suite they were stopped at 10. The
# package tests, cold, build the function for two platforms besides. It comes before
# GO_TEST_FLAGS, so a -timeout there wins (a flag given twice is set twice: go1.26.8
# src/flag/flag.go, durationValue.Set).
TEST_TIMEOUT ?= 40m
.PHONY: test-tools
test-tools: ## Build every binary make test runs (cached by version), in two lanes at once.
	$(call lanes,$(E2E_LANE_1) $(CROSSPLANE) $(PROMTOOL),$(E2E_LANE_2))

.PHONY: test
test: ## Run every test.
	@mkdir -p $(CACHE); $(MAKE) --no-print-directory test-tools > $(TEST_TOOLS_LOG) 2>&1 & tools=$$!; \
	  $(MAKE) --no-print-directory check-generated check-modules docs-test unit; rc=$$?; \
	  echo "make test: waiting for the binaries (test-tools, $(TEST_TOOLS_LOG))"; \
	  wait $$tools; built=$$?; cat $(TEST_TOOLS_LOG); [ $$rc -eq 0 ] && [ $$built -eq 0 ]
	@{ nice -n 10 $(MAKE) --no-print-directory render-test package-test flux-test > $(TEST_BESIDE_LOG) 2>&1; rc=$$?; \
	   echo "make test: render-test package-test flux-test ended, exit status $$rc:"; cat $(TEST_BESIDE_LOG); exit $$rc; } & \
	  beside=$$!; $(MAKE) --no-print-directory e2e-test; rc=$$?; wait $$beside; others=$$?; \
	  [ $$others -eq 0 ] || echo "make test: render-test, package-test or flux-test failed (above, and $(TEST_BESIDE_LOG))"; \
	  [ $$rc -eq 0 ] && [ $$others -eq 0 ]

# The final check's script calls curl, as its image has it; the unit tests and the e2e suite run
# that script on this machine. Debian's curl is installed when it is missing.
.PHONY: curl
# AMAZON_EKS_AMI: a git directory of awslabs/amazon-eks-ami (a clone, or the bare snapshot the
# search library's fetch brings); AMI_COMMIT: the commit to read (its newest by default).
AMAZON_EKS_AMI ?=
AMI_COMMIT ?= HEAD
AMI_RELEASES = internal/ami/releases.txt
.PHONY: ami-releases check-ami-releases
ami-releases: ## Refresh internal/ami/releases.txt from awslabs/amazon-eks-ami's CHANGELOG (AMAZON_EKS_AMI=<git dir>), recording its commit, the commit's date and today's.
	@test -n "$(AMAZON_EKS_AMI)" || { echo "set AMAZON_EKS_AMI to a git directory of awslabs/amazon-eks-ami" >&2; exit 2; }
	@mkdir -p $(OUTPUT)
	commit=$$(git -C $(AMAZON_EKS_AMI) rev-parse --verify '$(AMI_COMMIT)^{commit}') && \
	  git -C $(AMAZON_EKS_AMI) show $$commit:CHANGELOG.md > $(OUTPUT)/CHANGELOG.md && \
	  go run ./hack/amireleases -changelog $(OUTPUT)/CHANGELOG.md -commit $$commit \
	    -date $$(git -C $(AMAZON_EKS_AMI) log -1 --format=%cs $$commit) -read $$(date -u +%F) > $(OUTPUT)/releases.txt && \
	  mv $(OUTPUT)/releases.txt $(AMI_RELEASES)

check-ami-releases: ## Fail unless internal/ami/releases.txt is what its recorded commit of the CHANGELOG gives (AMAZON_EKS_AMI=<git dir>); make test holds it to the generator without the repository.
	@test -n "$(AMAZON_EKS_AMI)" || { echo "set AMAZON_EKS_AMI to a git directory of awslabs/amazon-eks-ami" >&2; exit 2; }
	@mkdir -p $(OUTPUT)
	commit=$$(sed -n 's|.*amazon-eks-ami/blob/\([0-9a-f]*\)/CHANGELOG.md|\1|p' $(AMI_RELEASES)) && \
	  read=$$(sed -n 's|.*read on \([0-9-]*\)).*|\1|p' $(AMI_RELEASES)) && \
	  git -C $(AMAZON_EKS_AMI) show $$commit:CHANGELOG.md > $(OUTPUT)/CHANGELOG.md && \
	  go run ./hack/amireleases -changelog $(OUTPUT)/CHANGELOG.md -commit $$commit \
	    -date $$(git -C $(AMAZON_EKS_AMI) log -1 --format=%cs $$commit) -read $$read | diff -u $(AMI_RELEASES) -

curl:
	@command -v curl >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq curl; } || \
	  { echo "the final check's tests need curl: install it" >&2; exit 1; }

# The unit tests' timeout: they take seconds each, a few minutes in all on a busy 2-core machine
# (make test builds its tools beside them); go test's default, 10 minutes, stopped them once when
# the machine was saturated. Property and fuzz depth is a number of inputs, given to make fuzz.
UNIT_TIMEOUT ?= 20m
PROPERTY_SEQUENCES ?= 200
.PHONY: unit
unit: curl ## Unit and multi-reconcile tests.
	go vet ./...
	go test $(GO_TEST_VETTED) -timeout $(UNIT_TIMEOUT) $(GO_TEST_FLAGS) ./...

# Each target's budget is a number of inputs (about 15 s each on a 2-core machine), not a
# duration: with a duration, Go 1.26's fuzzing coordinator can report its own deadline as a
# failure ("context deadline exceeded", no crasher: golang/go#75804; go1.26.8
# src/internal/fuzz/fuzz.go's stop compares the error with fuzzCtx's alone, fixed in Go 1.27).
FUZZ_LOAD_EXECS ?= 40000x
FUZZ_FUNCTION_EXECS ?= 6000x
.PHONY: fuzz
fuzz: ## Each fuzz target for its budget of inputs, from the committed seed corpus; the property test deeper.
	go test -count=1 -timeout $(UNIT_TIMEOUT) -run '^TestInvariantsUnderRandomProviders$$' ./fn/ -sequences $(PROPERTY_SEQUENCES)
	go test -run '^$$' -fuzz '^FuzzLoad$$' -fuzztime $(FUZZ_LOAD_EXECS) ./internal/config/
	go test -run '^$$' -fuzz '^FuzzRunFunction$$' -fuzztime $(FUZZ_FUNCTION_EXECS) ./fn/

.PHONY: render-test
render-test: $(CROSSPLANE) $(CROSSPLANE_VALIDATE_SEED) provider-aws-crds provider-kubernetes-crds flux-crds k8s-schemas ## Golden crossplane render per step, validated.
	go vet -tags render ./test/render/...
	$(RENDER_ENV) go test $(GO_TEST_VETTED) -timeout $(TEST_TIMEOUT) $(GO_TEST_FLAGS) -tags render ./test/render/...

.PHONY: flux-test
flux-test: $(PROMTOOL) ## What Flux would apply: kustomize build + Karpenter and prometheus-operator CRD validation (CEL included), the chart rendered with the values, the alert rules through promtool, every metric read from Karpenter's sources.
	cd test/flux && go vet ./... && PROMTOOL=$(PROMTOOL) go test $(GO_TEST_VETTED) -timeout $(TEST_TIMEOUT) $(GO_TEST_FLAGS) ./...

.PHONY: update-golden
update-golden: $(CROSSPLANE) $(CROSSPLANE_VALIDATE_SEED) provider-aws-crds provider-kubernetes-crds flux-crds k8s-schemas ## Rewrite fixtures and golden render output.
	go test -count=1 -timeout $(UNIT_TIMEOUT) ./fn -run TestExampleFixtures -update
	$(RENDER_ENV) go test -count=1 -timeout $(TEST_TIMEOUT) -tags render ./test/render/... -update

.PHONY: bench
bench: ## Benchmarks of RunFunction (ns/op, B/op, allocs/op).
	go test -run '^$$' -bench . -benchmem ./fn/

.PHONY: help
help:
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'
