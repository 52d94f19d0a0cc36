# wizard — common tasks. `make help` lists them.
GO ?= go

.PHONY: help demo test race fuzz bench bench-short long faults faults-short podsim podsim-short scale compare deploy lint ci docs
help:
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

demo: ## run the in-process demo mesh
	$(GO) run ./examples/services/demo

test: ## run the tests with the race detector, shuffled
	$(GO) test -race -shuffle=on ./...

fuzz: ## run each fuzz target for FUZZTIME (default 10s)
	./.ci/fuzz $(or $(FUZZTIME),10s)

bench: ## run the runtime benchmarks (the README's figures)
	$(GO) test ./runtime ./runtime/internal/patrun -run '^$$' -bench . -benchmem -count 5

bench-short: ## run every benchmark once at a tiny benchtime, so none rots
	$(GO) test ./... -run '^$$' -bench . -benchtime 100x

long: ## the long forms: 50-node gossip clusters and the discovery figures (WIZARD_LONG=1, no -race)
	WIZARD_LONG=1 $(GO) test -count=1 ./runtime/swim/
	WIZARD_LONG=1 $(GO) test -count=1 -run TestMeasure -v ./runtime/swim/

faults: ## the fault suite, long form (root, /dev/net/tun, ip; about 7 minutes): nodes in network namespaces, faults in userspace; writes FAULT_REPORT (default faults.md)
	WIZARD_FAULT=long WIZARD_FAULT_REPORT=$(abspath $(or $(FAULT_REPORT),faults.md)) $(GO) test -count=1 -timeout 30m -run '^TestFaults$$' -v ./runtime/internal/faults/

faults-short: ## the fault suite, short form (about 3 minutes); writes FAULT_REPORT (default faults-short.md)
	WIZARD_FAULT=1 WIZARD_FAULT_REPORT=$(abspath $(or $(FAULT_REPORT),faults-short.md)) $(GO) test -count=1 -timeout 15m -run '^TestFaults$$' -v ./runtime/internal/faults/

podsim: ## the simulated Kubernetes rolling update, scale 3 → 10 → 3, two pods killed, the gateway rolled under 200 WebSocket clients; long form (root, /dev/net/tun, ip; the manifests' preStop, two rolls; a few minutes): pods as processes in network namespaces, cluster DNS (runtime/internal/podsim)
	WIZARD_PODSIM=long $(GO) test -count=1 -timeout 15m -run '^(TestRollingUpdate|TestScale|TestNodeLost|TestGatewayRoll)$$' -v ./runtime/internal/podsim/

podsim-short: ## the same scenarios, short form (each under a minute, about two minutes in all)
	WIZARD_PODSIM=1 $(GO) test -count=1 -timeout 10m -run '^(TestRollingUpdate|TestScale|TestNodeLost|TestGatewayRoll)$$' -v ./runtime/internal/podsim/

scale: ## how gossip and catalogs cost as the mesh grows: meshes of 50, 100, 200, 500 wizard nodes (WIZARD_SCALE_SIZES) in 4 processes on loopback, 100 patterns each (runtime/internal/meshscale; tens of minutes); writes SCALE_REPORT (default scale.md)
	WIZARD_SCALE=1 WIZARD_SCALE_REPORT=$(abspath $(or $(SCALE_REPORT),scale.md)) $(GO) test -count=1 -timeout 3h -run '^TestScale$$' -v ./runtime/internal/meshscale/

compare: ## the side-by-side comparison vs gRPC-go, HTTP/1.1 and a raw TCP floor (bench/, a few minutes)
	$(MAKE) -C bench compare

deploy: ## the deploy module: the images' binaries static, the images built with buildah (as root, where it runs), the Kubernetes manifests decoded strictly (deploy/)
	cd deploy && $(GO) vet ./... && $(GO) test -count=1 ./...

docs: ## compile or run every code block of README.md, CONTRIBUTING.md and docs/, follow their links (internal/doccheck)
	$(GO) test -count=1 ./internal/doccheck/

lint: ## gofmt and vet
	@test -z "$$(gofmt -l .)" || (gofmt -l . && exit 1)
	$(GO) vet ./...

ci: ## what CI runs
	bash .ci/run

# Code generation (buf.gen.yaml). buf is needed only to regenerate; install
# the pinned version with `make buf`.
BUF_VERSION := v1.75.0
BUF ?= $(or $(shell command -v buf 2>/dev/null),$(shell $(GO) env GOPATH)/bin/buf)
GENERATED := runtime/wizardpb examples/gen runtime/internal/testkit/testpb testdata cmd/protoc-gen-wizard/wizard
.PHONY: buf generate checkgenerate

buf: ## install the pinned buf through the Go toolchain
	$(GO) install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)

generate: ## regenerate the stubs, the golden-test descriptor sets and goldens (needs buf)
	find examples/gen runtime/internal/testkit/testpb -name '*.pb.go' -delete # drop stubs of removed protos; runtime/wizardpb is rewritten in place (the plugin imports it)
	$(BUF) generate
	cp proto/wizard/v1/options.proto cmd/protoc-gen-wizard/wizard/v1/options.proto # what protoc-gen-wizard -write-options writes
	@for d in $(patsubst %/input.proto,%,$(wildcard testdata/*/input.proto)); do \
	  echo "$(BUF) build $$d"; \
	  $(BUF) build $$d --config '{"version":"v2","modules":[{"path":"'$$d'"},{"path":"proto"}]}' \
	    --as-file-descriptor-set -o $$d/input.binpb || exit 1; \
	done
	$(GO) test ./cmd/protoc-gen-wizard -run '^TestGolden$$' -update

checkgenerate: generate ## lint the protos; fail if the committed generated code is stale
	$(BUF) lint
	git diff --exit-code -- $(GENERATED)
	@untracked=$$(git ls-files --others --exclude-standard -- $(GENERATED)); \
	if [ -n "$$untracked" ]; then echo "untracked generated files (commit them):"; echo "$$untracked"; exit 1; fi
