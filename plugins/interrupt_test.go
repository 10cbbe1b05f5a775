package plugins

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tetratelabs/wazero"
	"pgregory.net/rapid"
)

// A module with one endless loop and no global or export section: the
// rewrite adds both, in their places, and the check at the loop's top.
func TestInterruptibleGoldenBytes(t *testing.T) {
	in := []byte{
		0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
		0x01, 0x04, 0x01, 0x60, 0x00, 0x00, // type: () -> ()
		0x03, 0x02, 0x01, 0x00, // function 0 has type 0
		0x05, 0x03, 0x01, 0x00, 0x01, // memory: 1 page
		0x00, 0x0b, 0x0a, '.', 'd', 'e', 'b', 'u', 'g', '_', 'x', 'y', 0x00, // DWARF: dropped
		0x0a, 0x09, 0x01, 0x07, 0x00, 0x03, 0x40, 0x0c, 0x00, 0x0b, 0x0b, // loop br 0 end end
		0x00, 0x05, 0x04, 'n', 'a', 'm', 'e', // other custom sections stay
	}
	want := []byte{
		0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
		0x01, 0x04, 0x01, 0x60, 0x00, 0x00,
		0x03, 0x02, 0x01, 0x00,
		0x05, 0x03, 0x01, 0x00, 0x01,
		// global 0, stop: mut i32 = 0; global 1, fuel: mut i32 = 8192
		0x06, 0x0d, 0x02, 0x7f, 0x01, 0x41, 0x00, 0x0b, 0x7f, 0x01, 0x41, 0x80, 0xc0, 0x00, 0x0b,
		0x07, 0x11, 0x01, 0x0d, 'r', 'i', 'f', 't', 'g', 'a', 't', 'e', '.', 's', 't', 'o', 'p', 0x03, 0x00,
		0x0a, 0x27, 0x01, 0x25, 0x00, 0x03, 0x40,
		0x23, 0x01, 0x41, 0x01, 0x6b, 0x24, 0x01, // fuel -= 1
		0x23, 0x01, 0x45, 0x04, 0x40, // if fuel == 0
		0x41, 0x80, 0xc0, 0x00, 0x24, 0x01, // fuel = 8192
		0x41, 0x00, 0x40, 0x00, 0x1a, // memory.grow 0, dropped
		0x23, 0x00, 0x04, 0x40, 0x00, 0x0b, 0x0b, // if stop unreachable end end
		0x0c, 0x00, 0x0b, 0x0b,
		0x00, 0x05, 0x04, 'n', 'a', 'm', 'e',
	}
	got, err := interruptible(in)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("got  % x\nwant % x", got, want)
	}
}

func TestInterruptibleRefusesWhatItCannotRewrite(t *testing.T) {
	head := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00}
	code := func(body ...byte) []byte {
		b := []byte{0x01, 0x04, 0x01, 0x60, 0x00, 0x00, 0x03, 0x02, 0x01, 0x00}
		fn := append([]byte{0x00}, body...)
		sec := binary.AppendUvarint([]byte{0x01}, uint64(len(fn)))
		sec = append(sec, fn...)
		b = append(b, 0x0a)
		b = binary.AppendUvarint(b, uint64(len(sec)))
		return append(append([]byte(nil), head...), append(b, sec...)...)
	}
	for name, in := range map[string][]byte{
		"not wasm":        []byte("\x00asx\x01\x00\x00\x00"),
		"version 2":       {0x00, 0x61, 0x73, 0x6d, 0x02, 0x00, 0x00, 0x00},
		"truncated":       code(0x03, 0x40, 0x0b, 0x0b)[:20],
		"unknown opcode":  code(0x06, 0x0b),
		"threads opcode":  code(0xfe, 0x03, 0x00, 0x0b),
		"unknown section": append(append([]byte(nil), head...), 0x0e, 0x00),
		"long leb":        code(0x41, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00, 0x1a, 0x0b),
		"reserved export": append(append([]byte(nil), head...), 0x07, 0x11, 0x01, 0x0d, 'r', 'i', 'f', 't', 'g', 'a', 't', 'e', '.', 's', 't', 'o', 'p', 0x03, 0x00),
		"reserved start":  append(append([]byte(nil), head...), 0x07, 0x12, 0x01, 0x0e, 'r', 'i', 'f', 't', 'g', 'a', 't', 'e', '.', 's', 't', 'a', 'r', 't', 0x00, 0x00),
		"huge vector":     append(append([]byte(nil), head...), 0x07, 0x05, 0xff, 0xff, 0xff, 0xff, 0x0f),
	} {
		if _, err := interruptible(in); !errors.Is(err, errBadModule) {
			t.Errorf("%s: %v, want a malformed-module error", name, err)
		}
	}
}

// validator is a runtime that only decodes and validates: the interpreter's
// compilation is the validation the compiler runs, without the codegen
// (which takes minutes under -race for the Go examples).
func validator(ctx context.Context) wazero.Runtime {
	return wazero.NewRuntimeWithConfig(ctx, wazero.NewRuntimeConfigInterpreter())
}

// A start function is exported instead of started, for the host to call
// under the deadline.
func TestInterruptibleExportsTheStartFunction(t *testing.T) {
	ctx := context.Background()
	rt := validator(ctx)
	defer rt.Close(ctx)
	in := loadWasm(t, "bad_startloop")
	out, err := interruptible(in)
	if err != nil {
		t.Fatal(err)
	}
	cm, err := rt.CompileModule(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cm.ExportedFunctions()[startExport]; !ok {
		t.Fatalf("exports %v, want %s", cm.ExportedFunctions(), startExport)
	}
	// Instantiating the original would loop for ever; the copy returns.
	mod, err := rt.InstantiateModule(ctx, cm, wazero.NewModuleConfig())
	if err != nil {
		t.Fatal(err)
	}
	_ = mod.Close(ctx)
}

// Every guest the Makefile builds still compiles once rewritten.
func TestInterruptibleKeepsBuiltModulesValid(t *testing.T) {
	ctx := context.Background()
	rt := validator(ctx)
	defer rt.Close(ctx)
	var files []string
	for _, dir := range []string{"plugins", "examples"} {
		m, _ := filepath.Glob(filepath.Join(wasmDir(), dir, "*.wasm"))
		files = append(files, m...)
	}
	if len(files) < 10 {
		t.Fatalf("found %d modules in %s: run `make wasm`", len(files), wasmDir())
	}
	for _, f := range files {
		in, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(filepath.Base(f), "bad_") {
			continue // refused on purpose
		}
		out, err := interruptible(in)
		if err != nil {
			t.Errorf("%s: %v", filepath.Base(f), err)
			continue
		}
		if _, err := rt.CompileModule(ctx, out); err != nil {
			t.Errorf("%s: rewritten module does not compile: %v", filepath.Base(f), err)
		}
	}
}

// genBody generates a stack-neutral instruction sequence of every kind
// whose immediates interruptible must skip, adding to local 0 as it goes,
// so that a misplaced check changes the module or its result.
func genBody(t *rapid.T, depth int) []byte {
	var b []byte
	add := []byte{0x20, 0x00, 0x6a, 0x21, 0x00} // local.get 0 i32.add local.set 0
	for range rapid.IntRange(0, 6).Draw(t, "n") {
		kind := rapid.IntRange(0, 11).Draw(t, "kind")
		if depth > 3 && kind >= 8 {
			kind = 0
		}
		switch kind {
		case 0: // i32.const
			b = append(b, 0x41)
			b = appendSLEB(b, int64(rapid.Int32().Draw(t, "i32")))
			b = append(b, add...)
		case 1: // i64.const, wrapped
			b = append(b, 0x42)
			b = appendSLEB(b, rapid.Int64().Draw(t, "i64"))
			b = append(b, 0xa7)
			b = append(b, add...)
		case 2: // f32.const, f64.const: raw bytes, dropped
			b = append(b, 0x43)
			b = append(b, rapid.SliceOfN(rapid.Byte(), 4, 4).Draw(t, "f32")...)
			b = append(b, 0x1a, 0x44)
			b = append(b, rapid.SliceOfN(rapid.Byte(), 8, 8).Draw(t, "f64")...)
			b = append(b, 0x1a)
		case 3: // a load with its memarg
			b = append(b, 0x41, 0x00, 0x2d, 0x00)
			b = binary.AppendUvarint(b, uint64(rapid.IntRange(0, 65535).Draw(t, "offset")))
			b = append(b, add...)
		case 4: // v128.const and a lane
			b = append(b, 0xfd, 0x0c)
			b = append(b, rapid.SliceOfN(rapid.Byte(), 16, 16).Draw(t, "v128")...)
			b = append(b, 0xfd, 0x16, byte(rapid.IntRange(0, 15).Draw(t, "lane"))) // i8x16.extract_lane_u
			b = append(b, add...)
		case 5: // saturating truncation (0xfc 0)
			b = append(b, 0x43, 0x00, 0x00, 0x80, 0x3f, 0xfc, 0x00)
			b = append(b, add...)
		case 6: // select
			b = append(b, 0x41, 0x03, 0x41, 0x0b, 0x41)
			b = appendSLEB(b, int64(rapid.IntRange(0, 1).Draw(t, "cond")))
			b = append(b, 0x1b)
			b = append(b, add...)
		case 7: // br_table out of a block
			b = append(b, 0x02, 0x40, 0x41, 0x01, 0x0e, 0x02, 0x00, 0x00, 0x00, 0x0b)
		case 8: // block
			b = append(b, 0x02, 0x40)
			b = append(b, genBody(t, depth+1)...)
			b = append(b, 0x0b)
		case 9: // loop, run once, with a br_if that does not take
			b = append(b, 0x03, 0x40)
			b = append(b, genBody(t, depth+1)...)
			b = append(b, 0x41, 0x00, 0x0d, 0x00, 0x0b)
		case 10: // if else
			b = append(b, 0x41)
			b = appendSLEB(b, int64(rapid.IntRange(0, 1).Draw(t, "if")))
			b = append(b, 0x04, 0x40)
			b = append(b, genBody(t, depth+1)...)
			b = append(b, 0x05)
			b = append(b, genBody(t, depth+1)...)
			b = append(b, 0x0b)
		case 11: // a loop with a typed block type
			b = append(b, 0x03, 0x7f)
			b = append(b, genBody(t, depth+1)...)
			b = append(b, 0x41, 0x07, 0x0b)
			b = append(b, add...)
		}
	}
	return b
}

// genModule wraps a body in a module exporting it as "run" () -> i32, with
// one page of memory.
func genModule(body []byte) []byte {
	fn := append([]byte{0x01, 0x01, 0x7f}, body...) // one i32 local
	fn = append(fn, 0x20, 0x00, 0x0b)               // local.get 0 end
	code := binary.AppendUvarint([]byte{0x01}, uint64(len(fn)))
	code = append(code, fn...)
	m := []byte{0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
		0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7f, // type: () -> i32
		0x03, 0x02, 0x01, 0x00,
		0x05, 0x03, 0x01, 0x00, 0x01, // memory 1
		0x07, 0x07, 0x01, 0x03, 'r', 'u', 'n', 0x00, 0x00,
		0x0a}
	m = binary.AppendUvarint(m, uint64(len(code)))
	return append(m, code...)
}

// The rewritten module computes what the original does: the checks are
// where loops start and nowhere else.
func TestInterruptiblePreservesMeaning(t *testing.T) {
	ctx := context.Background()
	rt := validator(ctx)
	defer rt.Close(ctx)
	run := func(t *rapid.T, wasm []byte) uint64 {
		mod, err := rt.Instantiate(ctx, wasm)
		if err != nil {
			t.Fatalf("instantiate: %v", err)
		}
		defer mod.Close(ctx)
		res, err := mod.ExportedFunction("run").Call(ctx)
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		return res[0]
	}
	rapid.Check(t, func(t *rapid.T) {
		in := genModule(genBody(t, 0))
		out, err := interruptible(in)
		if err != nil {
			t.Fatalf("rewrite: %v", err)
		}
		if a, b := run(t, in), run(t, out); a != b {
			t.Fatalf("original returns %d, rewritten %d", a, b)
		}
	})
}

// FuzzInterruptible: the rewriter never panics, and never refuses or
// breaks a module wazero accepts.
func FuzzInterruptible(f *testing.F) {
	f.Add(genModuleSeed())
	for _, name := range []string{"good", "loop", "tiny_a"} {
		if b, err := os.ReadFile(filepath.Join(wasmDir(), "plugins", name+".wasm")); err == nil {
			f.Add(b)
		}
	}
	ctx := context.Background()
	rt := validator(ctx)
	defer rt.Close(ctx)
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := interruptible(in)
		if _, cerr := rt.CompileModule(ctx, in); cerr != nil {
			return // wazero refuses it too; any answer will do
		}
		if err != nil {
			if bytes.Contains(in, []byte(stopExport)) {
				return
			}
			t.Fatalf("refused a module wazero accepts: %v", err)
		}
		if _, err := rt.CompileModule(ctx, out); err != nil {
			t.Fatalf("rewritten module does not compile: %v", err)
		}
	})
}

func genModuleSeed() []byte {
	return genModule([]byte{0x03, 0x40, 0x41, 0x03, 0x20, 0x00, 0x6a, 0x21, 0x00, 0x0b})
}
