# hack/package.mk: the Function and Configuration packages (xpkgs), built without Docker, their
# test and their release. Included by the main Makefile after hack/tools.mk.
#
#   make package                      both packages into $(XPKG_DIR), for REGISTRY
#   make package-test                 build, push to a registry on 127.0.0.1, pull back, check
#   make release VERSION=v0.1.0 REGISTRY=host:port/org
#                                     push both packages to REGISTRY (VERSION must match ./VERSION)
#   make package-measure              runtime image size and the function's cold start
#   make admission CROSSPLANE_NAMESPACE=crossplane-system
#                                     the tenant admission policy, for Crossplane in that namespace
#
# The runtime image is a static build of ./fn on an empty base (user 65532, port 9443, entrypoint
# /function), one per platform, written by tools/xpkg/cmd/runtime-image with go-containerregistry;
# the Dockerfile builds the same image with Docker. The function is one xpkg per platform, joined
# into one multi-platform index by `crossplane xpkg push -f amd64.xpkg,arm64.xpkg`.
#
# The Configuration is built from a staged root (crossplane.yaml + apis/*.yaml, written by
# tools/xpkg/cmd/configuration) rather than from the repository root, so no other YAML of the tree
# (package/, examples/, test fixtures, .cache/) can slip into it; for a REGISTRY other than the
# canonical one the staging points the function dependency there and renames the Compositions'
# functionRefs to the name Crossplane gives that dependency. Examples embedded: the claim and the
# namespaced XR in the Configuration, both Compositions calling the function (with its Input) in
# the Function.

PACKAGE_MK_SAVED_DEFAULT_GOAL := $(.DEFAULT_GOAL)

# How the function's binary is built for its runtime image: static and without local paths (the
# Makefile's CGO_ENABLED=0 and -trimpath, which every go command it runs uses), stripped. The
# end-to-end suite runs a binary built the same way (hack/e2e.mk), so it tests what ships, and its
# build reuses the packages this one compiled.
FUNCTION_GO_BUILD := go build -ldflags '-s -w'

# The one source of truth for the release version: crossplane.yaml's function dependency and
# examples/functions.yaml must carry it too (test/package checks they agree).
PACKAGE_VERSION := $(shell cat $(CURDIR)/VERSION)
VERSION ?= $(PACKAGE_VERSION)
# Where crossplane.yaml and examples/functions.yaml say the function is published.
PACKAGE_REGISTRY := xpkg.crossplane.io/do-now
REGISTRY ?= $(PACKAGE_REGISTRY)

FUNCTION_PACKAGE := function-karpenter
CONFIGURATION_PACKAGE := configuration-karpenter
PACKAGE_ARCHS := amd64 arm64
PACKAGE_SOURCE := https://github.com/do-now/function-karpenter

XPKG_DIR := $(CURDIR)/_output/xpkg
XPKG_TOOLS := $(CURDIR)/tools/xpkg
FUNCTION_XPKGS := $(foreach a,$(PACKAGE_ARCHS),$(XPKG_DIR)/$(FUNCTION_PACKAGE)-$(a).xpkg)
CONFIGURATION_XPKG := $(XPKG_DIR)/$(CONFIGURATION_PACKAGE).xpkg
COLDSTART_RUNS ?= 30

comma := ,
empty :=
space := $(empty) $(empty)

# Always rebuilt: go build and the image tool are cached and reproducible (same binaries, same
# digests), and a stale package is worse than a few seconds.
.PHONY: package
package: $(CROSSPLANE) ## Build the Function (one xpkg per platform) and Configuration packages for REGISTRY.
	@rm -rf $(XPKG_DIR) && mkdir -p $(XPKG_DIR)/function-examples $(XPKG_DIR)/configuration-examples
	@for arch in $(PACKAGE_ARCHS); do \
	  echo "go build ./fn for linux/$$arch"; \
	  GOOS=linux GOARCH=$$arch $(FUNCTION_GO_BUILD) -o $(XPKG_DIR)/bin/linux_$$arch/function ./fn || exit 1; \
	done
	cd $(XPKG_TOOLS) && go run ./cmd/runtime-image -o $(XPKG_DIR) \
	  -version $(PACKAGE_VERSION) -source $(PACKAGE_SOURCE) \
	  $(foreach a,$(PACKAGE_ARCHS),linux/$(a)=$(XPKG_DIR)/bin/linux_$(a)/function)
	cd $(XPKG_TOOLS) && go run ./cmd/configuration -function-package $(REGISTRY)/$(FUNCTION_PACKAGE) \
	  -o $(XPKG_DIR)/configuration $(CURDIR)/crossplane.yaml $(wildcard $(CURDIR)/apis/*.yaml)
	cp examples/claim.yaml $(XPKG_DIR)/configuration-examples/
	cp examples/namespaced/xr.yaml $(XPKG_DIR)/configuration-examples/namespaced-karpenter.yaml
	cp $(XPKG_DIR)/configuration/composition.yaml $(XPKG_DIR)/configuration/composition-namespaced.yaml $(XPKG_DIR)/function-examples/
	@for arch in $(PACKAGE_ARCHS); do \
	  echo "crossplane xpkg build $(FUNCTION_PACKAGE) linux/$$arch"; \
	  $(CROSSPLANE) xpkg build --package-root=package --examples-root=$(XPKG_DIR)/function-examples \
	    --embed-runtime-image-tarball=$(XPKG_DIR)/runtime-linux-$$arch.tar \
	    -o $(XPKG_DIR)/$(FUNCTION_PACKAGE)-$$arch.xpkg || exit 1; \
	done
	$(CROSSPLANE) xpkg build --package-root=$(XPKG_DIR)/configuration \
	  --examples-root=$(XPKG_DIR)/configuration-examples -o $(CONFIGURATION_XPKG)

.PHONY: release-check
release-check:
	@if [ "$(VERSION)" != "$(PACKAGE_VERSION)" ]; then \
	  echo "VERSION=$(VERSION) but ./VERSION says $(PACKAGE_VERSION): set the new version in VERSION," >&2; \
	  echo "crossplane.yaml (the function dependency), examples/functions.yaml and the labels of" >&2; \
	  echo "admission/tenant-requests.yaml, and commit" >&2; \
	  exit 1; fi

.PHONY: release
release: release-check package admission ## Push both packages to REGISTRY, tagged VERSION; write the admission policy of the release.
	$(CROSSPLANE) xpkg push -f $(subst $(space),$(comma),$(FUNCTION_XPKGS)) $(REGISTRY)/$(FUNCTION_PACKAGE):$(VERSION)
	$(CROSSPLANE) xpkg push -f $(CONFIGURATION_XPKG) $(REGISTRY)/$(CONFIGURATION_PACKAGE):$(VERSION)
	@echo "the release's admission policy, to apply on the control plane: $(ADMISSION)"

# The tenant admission policy (admission/tenant-requests.yaml), a prerequisite the platform applies
# on its control plane, written for the namespace Crossplane runs in and checked to be labelled
# with ./VERSION (hack/admission).
CROSSPLANE_NAMESPACE ?= crossplane-system
ADMISSION := $(CURDIR)/_output/admission/karpenter-tenant-requests-$(PACKAGE_VERSION).yaml
.PHONY: admission
admission: ## The tenant admission policy for Crossplane in CROSSPLANE_NAMESPACE, into _output/admission/.
	go run ./hack/admission -namespace $(CROSSPLANE_NAMESPACE) -version $(PACKAGE_VERSION) -o $(ADMISSION)

# The test runs `make release` itself against an in-process registry on 127.0.0.1 (its timeout,
# TEST_TIMEOUT, is in the Makefile).
.PHONY: package-test
package-test: $(CROSSPLANE) $(CROSSPLANE_VALIDATE_SEED) ## Build, push and pull both packages; check versions and names agree.
	cd $(XPKG_TOOLS) && go vet ./... && go test $(GO_TEST_VETTED) -timeout $(TEST_TIMEOUT) $(GO_TEST_FLAGS) ./...
	cd test/package && go vet ./... && \
	  REPO_ROOT=$(CURDIR) MAKE_BIN=$(MAKE) CROSSPLANE=$(CROSSPLANE) VALIDATE_FLAGS="$(VALIDATE_FLAGS)" \
	  PACKAGE_REGISTRY=$(PACKAGE_REGISTRY) go test $(GO_TEST_VETTED) -timeout $(TEST_TIMEOUT) $(GO_TEST_FLAGS) ./...

.PHONY: package-measure
package-measure: package ## Runtime image size per platform and cold start (median of COLDSTART_RUNS).
	cd test/package && go run ./measure -n $(COLDSTART_RUNS) \
	  -binary $(XPKG_DIR)/bin/linux_$(shell go env GOARCH)/function \
	  -xr $(CURDIR)/examples/xr.yaml -composition $(CURDIR)/apis/composition.yaml \
	  $(foreach a,$(PACKAGE_ARCHS),$(XPKG_DIR)/runtime-linux-$(a).tar) $(FUNCTION_XPKGS) $(CONFIGURATION_XPKG)

.DEFAULT_GOAL := $(PACKAGE_MK_SAVED_DEFAULT_GOAL)
