# hack/tools.mk: build and cache the project's tools. Included by the main Makefile.
#
# Each tool is built from a small wrapper module under tools/<name>/ whose go.mod and go.sum pin
# it (never tidied in CI: `go build` runs with -mod=readonly and fails loudly if a sum is missing).
# Binaries are cached under $(TOOLS_BIN) with the version in their name, and are rebuilt when
# missing or older than their wrapper's files (wrapper, below): after bumping a version in
# tools/<name>/go.mod, bump the matching *_VERSION below too
# (the recipe refuses to build a binary whose name disagrees with the wrapper's go.mod).
#
# Everything comes from the Go module proxy; nothing else on the network is needed, and
# `crossplane beta validate` runs offline against the seeded $(VALIDATE_CACHE).

# This fragment defines file targets; keep whatever default goal the including Makefile has
# (restored at the end), so including it first does not make `make` build the Crossplane CLI.
TOOLS_MK_SAVED_DEFAULT_GOAL := $(.DEFAULT_GOAL)

CACHE ?= $(CURDIR)/.cache
TOOLS_BIN := $(CACHE)/bin
TOOLS_DIR := $(CURDIR)/tools

CROSSPLANE_VERSION := v2.2.1
CONTROLLER_GEN_VERSION := v0.20.1
CRANE_VERSION := v0.22.1
# Prometheus 3.16.0's module version.
PROMTOOL_VERSION := v0.316.0

CROSSPLANE := $(TOOLS_BIN)/crossplane-$(CROSSPLANE_VERSION)
CONTROLLER_GEN := $(TOOLS_BIN)/controller-gen-$(CONTROLLER_GEN_VERSION)
CRANE := $(TOOLS_BIN)/crane-$(CRANE_VERSION)
PROMTOOL := $(TOOLS_BIN)/promtool-$(PROMTOOL_VERSION)

CROSSPLANE_MODULE := github.com/crossplane/crossplane/v2
CONTROLLER_GEN_MODULE := sigs.k8s.io/controller-tools
CRANE_MODULE := github.com/google/go-containerregistry
PROMTOOL_MODULE := github.com/prometheus/prometheus

# $(call go-build-in,DIR,MODULE,VERSION,PACKAGE,LDFLAGS,TAGS,MAKEFILE)
# Builds PACKAGE from the wrapper module in DIR (relative to the repository): checks the wrapper
# pins VERSION (MAKEFILE names where VERSION is set), prints how long the build took, builds into
# a temporary file and renames it, so an interrupted build never leaves a half-written binary that
# make would take as up to date. hack/e2e.mk's e2e-build calls it too. It builds static and without
# local paths, as every go command the Makefile runs (CGO_ENABLED, GOFLAGS there).
define go-build-in
	@mkdir -p $(@D)
	@got=$$(cd $(CURDIR)/$(1) && go list -m -f '{{.Version}}' $(2)) && \
	  if [ "$$got" != "$(3)" ]; then \
	    echo "$(1)/go.mod pins $(2) $$got, $(7) expects $(3)" >&2; exit 1; fi
	@echo "$(1): go build $(4)"; start=$$(date +%s); \
	  cd $(CURDIR)/$(1) && go build -buildvcs=false -tags '$(6)' -ldflags '-s -w $(5)' -o $@.tmp $(4) && \
	  echo "$(1): $(@F) built in $$(( $$(date +%s) - start )) s"
	@mv -f $@.tmp $@
endef

# $(call wrapper,DIR): the files of the wrapper module in DIR that decide what it builds (go.mod, go.sum,
# its Go files, and those of a module it replaces from a folder of its own, such as
# e2e/tools/controllers/nebius-gosdk-standin). Each binary depends on them: a cached binary's name
# holds the tool's version only, and a raised dependency in the wrapper's go.mod must rebuild it.
wrapper = $(shell find $(1) -type f \( -name go.mod -o -name go.sum -o -name '*.go' \))

# $(call build-tool,WRAPPER_DIR,MODULE,VERSION,PACKAGE[,LDFLAGS[,TAGS]]): a tool from tools/WRAPPER_DIR.
build-tool = $(call go-build-in,tools/$(1),$(2),$(3),$(4),$(5),$(6),hack/tools.mk)

$(CROSSPLANE): $(call wrapper,$(TOOLS_DIR)/crossplane)
	$(call build-tool,crossplane,$(CROSSPLANE_MODULE),$(CROSSPLANE_VERSION),$(CROSSPLANE_MODULE)/cmd/crank,-X $(CROSSPLANE_MODULE)/internal/version.version=$(CROSSPLANE_VERSION))

$(CONTROLLER_GEN): $(call wrapper,$(TOOLS_DIR)/controller-gen)
	$(call build-tool,controller-gen,$(CONTROLLER_GEN_MODULE),$(CONTROLLER_GEN_VERSION),$(CONTROLLER_GEN_MODULE)/cmd/controller-gen)

$(CRANE): $(call wrapper,$(TOOLS_DIR)/crane)
	$(call build-tool,crane,$(CRANE_MODULE),$(CRANE_VERSION),$(CRANE_MODULE)/cmd/crane)

# promtool checks and unit-tests the alert rules (test/flux).
$(PROMTOOL): $(call wrapper,$(TOOLS_DIR)/promtool)
	$(call build-tool,promtool,$(PROMTOOL_MODULE),$(PROMTOOL_VERSION),$(PROMTOOL_MODULE)/cmd/promtool,-X github.com/prometheus/common/version.Version=3.16.0,remove_all_sd)

.PHONY: tools
tools: $(CROSSPLANE) $(CONTROLLER_GEN) $(CRANE) $(PROMTOOL)

# --- crossplane beta validate, offline ---------------------------------------------------------
# validate always loads the schemas of the Crossplane image it is told about, from
# <cache-dir>/<image with ':' replaced by '@'>/*.yaml, and downloads them only if that directory
# is missing. Seed it with the CRDs shipped in the crossplane module (cluster/crds/), so no
# registry is needed. Use: $(CROSSPLANE) beta validate $(VALIDATE_FLAGS) EXTENSIONS RESOURCES
VALIDATE_CACHE := $(CACHE)/validate
CROSSPLANE_IMAGE := xpkg.crossplane.io/crossplane/crossplane:$(CROSSPLANE_VERSION)
CROSSPLANE_VALIDATE_SEED := $(VALIDATE_CACHE)/xpkg.crossplane.io/crossplane/crossplane@$(CROSSPLANE_VERSION)/package.yaml
VALIDATE_FLAGS := --cache-dir $(VALIDATE_CACHE) --crossplane-image=$(CROSSPLANE_IMAGE)

# Written aside and moved in last: validate treats an existing image directory as cached, even
# if it is empty, so the directory must never exist without its package.yaml.
$(CROSSPLANE_VALIDATE_SEED):
	@mkdir -p $(VALIDATE_CACHE)
	cd $(TOOLS_DIR)/crossplane && go mod download $(CROSSPLANE_MODULE)
	@rm -rf $(VALIDATE_CACHE)/.seed.tmp && mkdir -p $(VALIDATE_CACHE)/.seed.tmp
	dir=$$(cd $(TOOLS_DIR)/crossplane && go list -m -f '{{.Dir}}' $(CROSSPLANE_MODULE)) && \
	  test -n "$$dir" && ls "$$dir"/cluster/crds/*.yaml >/dev/null && \
	  for f in "$$dir"/cluster/crds/*.yaml; do \
	    echo '---'; sed '/^---[[:space:]]*$$/d' "$$f"; \
	  done > $(VALIDATE_CACHE)/.seed.tmp/package.yaml
	@mkdir -p $(dir $(@D)) && rm -rf $(@D) && mv $(VALIDATE_CACHE)/.seed.tmp $(@D)

.PHONY: validate-cache
validate-cache: $(CROSSPLANE_VALIDATE_SEED)

# --- provider-aws CRDs (schemas for validation), from the main module's requirement -------------
# Directory of the provider-aws v2 CRDs (cluster *.aws.upbound.io and namespaced
# *.aws.m.upbound.io) inside the Go module cache, at the version the main go.mod requires.
# Evaluated lazily and at most once per make run; downloads the module if needed.
PROVIDER_AWS_MODULE := github.com/upbound/provider-aws/v2
PROVIDER_AWS_CRDS = $(eval PROVIDER_AWS_CRDS := $$(shell \
  go mod download $(PROVIDER_AWS_MODULE) && \
  d=$$$$(go list -m -f '{{.Dir}}' $(PROVIDER_AWS_MODULE)) && test -n "$$$$d" && echo "$$$$d/package/crds"))$(PROVIDER_AWS_CRDS)

.PHONY: provider-aws-crds
provider-aws-crds:
	@test -n "$(PROVIDER_AWS_CRDS)" && test -d "$(PROVIDER_AWS_CRDS)" || \
	  { echo "cannot locate $(PROVIDER_AWS_MODULE) CRDs (is it required by go.mod?)" >&2; exit 1; }
	@echo $(PROVIDER_AWS_CRDS)

# --- Flux CRDs and Kubernetes schemas (validation), from module zips ----------------------------
# $(call module-dir,MODULE@VERSION): the module's directory in the Go module cache, downloaded if
# needed; empty (and go's error on stderr) if it cannot be. Run in tools/k8sschemas, a module that
# requires nothing, with -mod=mod: downloading MODULE@VERSION never writes its go.mod or go.sum.
module-dir = $(shell cd $(TOOLS_DIR)/k8sschemas && GOFLAGS=-mod=mod go mod download -json $(1) | \
  sed -n 's/.*"Dir": "\(.*\)".*/\1/p')

# Directories of the Flux CRDs (config/crd/bases of each controller's module zip). Evaluated
# lazily and at most once per make run, like PROVIDER_AWS_CRDS.
FLUX_KUSTOMIZE_CONTROLLER := github.com/fluxcd/kustomize-controller@v1.7.2
FLUX_HELM_CONTROLLER := github.com/fluxcd/helm-controller@v1.4.0
FLUX_SOURCE_CONTROLLER := github.com/fluxcd/source-controller@v1.7.0
FLUX_KUSTOMIZE_CRDS = $(eval FLUX_KUSTOMIZE_CRDS := $$(addsuffix /config/crd/bases,$$(call module-dir,$(FLUX_KUSTOMIZE_CONTROLLER))))$(FLUX_KUSTOMIZE_CRDS)
FLUX_HELM_CRDS = $(eval FLUX_HELM_CRDS := $$(addsuffix /config/crd/bases,$$(call module-dir,$(FLUX_HELM_CONTROLLER))))$(FLUX_HELM_CRDS)
FLUX_SOURCE_CRDS = $(eval FLUX_SOURCE_CRDS := $$(addsuffix /config/crd/bases,$$(call module-dir,$(FLUX_SOURCE_CONTROLLER))))$(FLUX_SOURCE_CRDS)

# provider-kubernetes, whose Object carries step three's objects to the claimed cluster: its
# CRDs from the module zip, at the version crossplane.yaml depends on at least; the e2e suite
# builds and runs this version (hack/e2e.mk).
PROVIDER_KUBERNETES := github.com/crossplane-contrib/provider-kubernetes@v1.3.1
PROVIDER_KUBERNETES_CRDS = $(eval PROVIDER_KUBERNETES_CRDS := $$(addsuffix /package/crds,$$(call module-dir,$(PROVIDER_KUBERNETES))))$(PROVIDER_KUBERNETES_CRDS)

.PHONY: provider-kubernetes-crds
provider-kubernetes-crds:
	@test -n "$(PROVIDER_KUBERNETES_CRDS)" && test -d "$(PROVIDER_KUBERNETES_CRDS)" || \
	  { echo "cannot locate the $(PROVIDER_KUBERNETES) CRDs (see go's error above)" >&2; exit 1; }
	@echo $(PROVIDER_KUBERNETES_CRDS)

.PHONY: flux-crds
flux-crds:
	@for d in "$(FLUX_KUSTOMIZE_CRDS)" "$(FLUX_HELM_CRDS)" "$(FLUX_SOURCE_CRDS)"; do \
	  test -n "$$d" && test -d "$$d" || { echo "cannot locate the Flux CRDs (see go's error above)" >&2; exit 1; }; \
	  echo "$$d"; done

# Kubernetes' built-in kinds as CRDs, so validate can check them: tools/k8sschemas reads the
# OpenAPI v3 documents published in the k8s.io/kubernetes module zip and writes one file per kind
# of K8S_SCHEMA_KINDS (APIVERSION/KIND) to $(K8S_SCHEMAS)/<apiVersion with / as _>_<Kind>.yaml,
# e.g. v1_Pod.yaml. Written when missing or older than the generator's source.
K8S_VERSION := v1.35.4
K8S_MODULE := k8s.io/kubernetes
K8S_OPENAPI = $(eval K8S_OPENAPI := $$(addsuffix /api/openapi-spec/v3,$$(call module-dir,$(K8S_MODULE)@$(K8S_VERSION))))$(K8S_OPENAPI)
K8S_SCHEMA_KINDS := v1/Namespace v1/ServiceAccount v1/Pod apps/v1/Deployment rbac.authorization.k8s.io/v1/Role rbac.authorization.k8s.io/v1/RoleBinding
K8S_SCHEMAS := $(CACHE)/k8s-schemas/$(K8S_VERSION)
K8S_SCHEMA_FILES := $(foreach k,$(K8S_SCHEMA_KINDS),$(K8S_SCHEMAS)/$(subst /,_,$(k)).yaml)

$(K8S_SCHEMAS)/%.yaml: $(TOOLS_DIR)/k8sschemas/main.go $(TOOLS_DIR)/k8sschemas/go.mod
	@test -n "$(K8S_OPENAPI)" && test -d "$(K8S_OPENAPI)" || \
	  { echo "cannot locate the OpenAPI documents of $(K8S_MODULE)@$(K8S_VERSION)" >&2; exit 1; }
	cd $(TOOLS_DIR)/k8sschemas && go run . -spec-dir $(K8S_OPENAPI) \
	  -source $(K8S_MODULE)@$(K8S_VERSION)/api/openapi-spec/v3 -out $(K8S_SCHEMAS) $(subst _,/,$*)

.PHONY: k8s-schemas
k8s-schemas: $(K8S_SCHEMA_FILES)

.DEFAULT_GOAL := $(TOOLS_MK_SAVED_DEFAULT_GOAL)
