# wizard — common tasks. `make help` lists them.
GO ?= go

.PHONY: help demo test race fuzz bench bench-short lint ci
help:
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

demo: ## run the in-process demo mesh
	$(GO) run ./examples/services/demo

test: ## run the tests with the race detector, shuffled
	$(GO) test -race -shuffle=on ./...

fuzz: ## run each fuzz target for FUZZTIME (default 10s)
	./.ci/fuzz $(or $(FUZZTIME),10s)

bench: ## run the runtime benchmarks (the README's figures)
	$(GO) test ./runtime -run '^$$' -bench . -benchmem -count 5

bench-short: ## run every benchmark once at a tiny benchtime, so none rots
	$(GO) test ./... -run '^$$' -bench . -benchtime 100x

lint: ## gofmt and vet
	@test -z "$$(gofmt -l .)" || (gofmt -l . && exit 1)
	$(GO) vet ./...

ci: ## what CI runs
	bash .ci/run
