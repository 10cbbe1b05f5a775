# Example plugins (examples/), built into $(WASMDIR)/examples/<name>.wasm.
# Included by the top-level Makefile, before sdk/sdk.mk (fragments are
# sorted), so prerequisites here name the kits' paths themselves: a variable
# from sdk.mk would still be empty when these rules are read. Variables used
# only in recipes (RUSTC, RUST_WASM, SDK_RUST_RLIB) are expanded later.

.DEFAULT_GOAL := all

EXAMPLES_OUT := $(WASMDIR)/examples
GO_EXAMPLES  := counter-go cart-go flowbench
EX_GO_KIT    := sdk/go/go.mod $(wildcard sdk/go/*.go)
EX_RUST_KIT  := $(BUILD)/sdk/rust/librift.rlib
EX_C_KIT     := sdk/c/rift.h
EX_AS_KIT    := $(wildcard sdk/assemblyscript/assembly/*.ts)

WASM += $(GO_EXAMPLES:%=$(EXAMPLES_OUT)/%.wasm)

# Each Go example is a nested module with a replace directive pointing at
# sdk/go and no other dependency, so the build needs no network. GOWORK=off
# keeps a stray go.work from changing what is built; -trimpath and
# -buildvcs=false make the module byte-identical across checkouts (a dirty
# work tree would otherwise stamp different VCS data).
$(GO_EXAMPLES:%=$(EXAMPLES_OUT)/%.wasm): $(EXAMPLES_OUT)/%.wasm: examples/%/main.go examples/%/go.mod $(EX_GO_KIT)
	mkdir -p $(@D)
	cd examples/$* && GOOS=wasip1 GOARCH=wasm GOWORK=off $(GO) build -trimpath -buildvcs=false -buildmode=c-shared -o $@ .

WASM += $(EXAMPLES_OUT)/tokenbucket-rust.wasm $(EXAMPLES_OUT)/echo-c.wasm \
        $(EXAMPLES_OUT)/sequence-as.wasm $(EXAMPLES_OUT)/counter-wat.wasm \
        $(EXAMPLES_OUT)/flowbench-wat.wasm

# Rust: Debian's rustc, no cargo; the plugin links the kit's rlib.
$(EXAMPLES_OUT)/tokenbucket-rust.wasm: examples/tokenbucket-rust/main.rs $(EX_RUST_KIT)
	mkdir -p $(@D)
	$(RUSTC) $(RUST_WASM) -C strip=debuginfo --crate-type cdylib --crate-name tokenbucket_rust \
		--extern rift=$(SDK_RUST_RLIB) -o $@ $<

# C: no libc; RIFT_HANDLE in the source names the exports.
$(EXAMPLES_OUT)/echo-c.wasm: examples/echo-c/echo.c $(EX_C_KIT)
	mkdir -p $(@D)
	clang --target=wasm32 -O2 -nostdlib -mbulk-memory -Wall -Wextra -Werror \
		-Wl,--no-entry -Wl,--strip-debug -I sdk/c -o $@ $<

# AssemblyScript: asc comes from `make node` (build/node), so installing it
# is an order-only prerequisite: it runs once, and a newer stamp does not
# rebuild the module.
$(EXAMPLES_OUT)/sequence-as.wasm: examples/sequence-as/sequence.ts $(EX_AS_KIT) | $(NODEDIR)/.installed
	mkdir -p $(@D)
	$(RIFTGATE_ASC) $< -O3 --runtime minimal --use abort= -o $@

# WAT: wabt.
$(EXAMPLES_OUT)/counter-wat.wasm: examples/counter-wat/counter.wat
	mkdir -p $(@D)
	wat2wasm $< -o $@

$(EXAMPLES_OUT)/flowbench-wat.wasm: examples/flowbench-wat/flowbench.wat
	mkdir -p $(@D)
	wat2wasm $< -o $@
