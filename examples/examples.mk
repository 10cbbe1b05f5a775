# Example plugins (examples/), built into $(WASMDIR)/examples/<name>.wasm.
# Included by the top-level Makefile; sdk/sdk.mk defines the kit variables.

.DEFAULT_GOAL := all

EXAMPLES_OUT := $(WASMDIR)/examples
GO_EXAMPLES  := counter-go cart-go flowbench

WASM += $(GO_EXAMPLES:%=$(EXAMPLES_OUT)/%.wasm)

# Each Go example is a nested module with a replace directive pointing at
# sdk/go and no other dependency, so the build needs no network. GOWORK=off
# keeps a stray go.work from changing what is built.
$(GO_EXAMPLES:%=$(EXAMPLES_OUT)/%.wasm): $(EXAMPLES_OUT)/%.wasm: examples/%/main.go examples/%/go.mod $(SDK_GO_SRC)
	mkdir -p $(@D)
	cd examples/$* && GOOS=wasip1 GOARCH=wasm GOWORK=off $(GO) build -trimpath -buildmode=c-shared -o $@ .
