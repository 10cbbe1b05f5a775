# plugins: the WAT guests the plugin host's tests run, built with wabt.
PLUGINS_WAT := $(wildcard plugins/testdata/*.wat)
WASM += $(patsubst plugins/testdata/%.wat,$(WASMDIR)/plugins/%.wasm,$(PLUGINS_WAT))

$(WASMDIR)/plugins/%.wasm: plugins/testdata/%.wat
	@mkdir -p $(@D)
	wat2wasm -o $@ $<
