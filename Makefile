# riftgate: `make run` starts it with demo imposters; `make test` runs every test.
GO      ?= go
BIN     := $(CURDIR)/bin
BUILD   := $(CURDIR)/build
WASMDIR := $(BUILD)/wasm
NODEDIR := $(BUILD)/node

# Tests find the real binary, the built modules and Mountebank through these.
export RIFTGATE_BIN      := $(BIN)/riftgate
export RIFTGATE_WASM_DIR := $(WASMDIR)
export RIFTGATE_MB       := $(NODEDIR)/node_modules/.bin/mb
export RIFTGATE_ASC      := $(NODEDIR)/node_modules/.bin/asc

GOSRC := $(shell find . -name '*.go' -not -path './build/*' -not -path './sdk/*' -not -path './examples/*') $(shell find gateway/ui/assets -type f) $(wildcard examples/demo/*) go.mod go.sum

# Fragments add their modules to WASM (the list of .wasm files to build).
WASM :=
.DEFAULT_GOAL := all
include $(sort $(wildcard */*.mk))

.PHONY: all build run cluster test test-short bench pgo lint wasm node clean
all: build

build: $(BIN)/riftgate wasm

$(BIN)/riftgate: $(GOSRC) $(wildcard cmd/riftgate/default.pgo)
	$(GO) build -o $@ ./cmd/riftgate

wasm: $(WASM)

run: $(BIN)/riftgate
	mkdir -p $(BUILD)
	$(BIN)/riftgate start --demo --allowInjection --pidfile $(BUILD)/riftgate.pid --logfile $(BUILD)/riftgate.log

# A local 3-node cluster on 127.0.0.1-3 to try (docs/cluster.md); Ctrl-C stops it.
cluster: $(BIN)/riftgate
	./gateway/cluster/local.sh

# Mountebank 2.9.1 (the reference for differential tests and benchmarks) and
# AssemblyScript, installed from npm into build/node.
node: $(NODEDIR)/.installed
$(NODEDIR)/.installed:
	mkdir -p $(NODEDIR)
	cd $(NODEDIR) && [ -f package.json ] || (cd $(NODEDIR) && npm init -y >/dev/null)
	cd $(NODEDIR) && npm install --no-audit --no-fund mountebank@2.9.1 assemblyscript@0.28
	touch $@

test: build node
	$(GO) vet ./...
	$(GO) test -race -timeout 40m ./...

test-short: build
	$(GO) test -short ./...

bench: build node
	./loadtest/bench/run.sh

# Regenerates cmd/riftgate/default.pgo (profile-guided optimisation) from
# riftgate's own profile under make bench's loads; commit the result.
pgo: build node
	./loadtest/bench/pgo.sh

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) tool staticcheck ./...

clean:
	rm -rf $(BIN) $(BUILD)
