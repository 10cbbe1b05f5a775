# Guest kits (sdk/). Included by the top-level Makefile.
#
# The Go kit is its own module (so the root module never compiles wasm-only
# files) and has its own tests; the Rust kit is compiled once to an rlib that
# the Rust examples link with --extern. The C and AssemblyScript kits are
# sources that examples include or import directly.

# Fragments are included before the top-level Makefile's first target, so
# name the default goal here or the first rule below would take its place.
.DEFAULT_GOAL := all

RUSTC          ?= /usr/bin/rustc
RUST_WASM      := --edition 2021 --target wasm32-unknown-unknown -C opt-level=3
SDK_RUST_RLIB  := $(BUILD)/sdk/rust/librift.rlib

$(SDK_RUST_RLIB): sdk/rust/src/lib.rs
	mkdir -p $(@D)
	$(RUSTC) $(RUST_WASM) --crate-type rlib --crate-name rift -o $@ $<

# `make test` and `make lint` reach the nested modules (sdk/go and the Go
# examples) only through these targets.
test: test-sdk
lint: lint-sdk

.PHONY: test-sdk lint-sdk
# The kits' codec tests (golden bytes, malformed input, fuzz seeds) run
# natively: `go test ./...` at the root does not reach the nested Go module,
# and the Rust kit has no cargo. The C and AssemblyScript codecs are tested
# through the examples (go test ./examples/).
test-sdk:
	cd sdk/go && GOWORK=off $(GO) vet ./... && GOWORK=off $(GO) test -race ./...
	cd sdk/go && GOOS=wasip1 GOARCH=wasm GOWORK=off $(GO) vet ./...
	mkdir -p $(BUILD)/sdk/rust
	$(RUSTC) --edition 2021 --test -o $(BUILD)/sdk/rust/rift-test sdk/rust/src/lib.rs
	$(BUILD)/sdk/rust/rift-test

# The root module's staticcheck, built once and run inside each nested
# module, natively and for wasip1 (the host bindings build only there).
SDK_STATICCHECK := $(BUILD)/tools/staticcheck
$(SDK_STATICCHECK): go.mod go.sum
	$(GO) build -o $@ honnef.co/go/tools/cmd/staticcheck

lint-sdk: $(SDK_STATICCHECK)
	cd sdk/go && GOWORK=off $(SDK_STATICCHECK) ./... && GOOS=wasip1 GOARCH=wasm GOWORK=off $(SDK_STATICCHECK) ./...
	for d in counter-go cart-go flowbench; do \
		(cd examples/$$d && GOOS=wasip1 GOARCH=wasm GOWORK=off $(GO) vet ./... && \
		 GOOS=wasip1 GOARCH=wasm GOWORK=off $(SDK_STATICCHECK) ./...) || exit 1; \
	done
