package plugins

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// stopExport names the global that interruptible adds to a module. The
// watchdog sets it to 1 to stop a call past its deadline; the guest traps
// soon after, at a loop header. This is the idea of wasmtime's epoch
// interruption, and what wazero's WithCloseOnContextDone does at a far
// higher price: in wazero 1.12 its check leaves the JIT for Go at every loop
// header (wazero issue #2466), which cost plugins 2-4x, and it starts a
// goroutine per call.
const stopExport = "riftgate.stop"

// startExport names the module's start function, if it has one, in the
// rewritten copy. A start function runs while wazero instantiates the
// module, before the host can reach the stop flag; the rewrite drops the
// start section and exports the function instead, so that the host calls it
// right after instantiation (which is when it would have run), under the
// deadline like any call.
const startExport = "riftgate.start"

// fuelPerExit is how many loop iterations a guest runs between two exits
// from the JIT to Go. The exits matter beyond the stop flag: Go cannot
// preempt a goroutine while it runs compiled WebAssembly, so a guest that
// never left the JIT would hold up every stop-the-world of the garbage
// collector, and with it the whole process, watchdog included. An exit
// costs about 200 ns; 8192 iterations of the cheapest loop cost about 10 µs.
const fuelPerExit = 8192

// loopCheck is what interruptible puts at the top of every loop body:
//
//	fuel -= 1
//	if fuel == 0 {
//		fuel = fuelPerExit
//		memory.grow(0) // leaves the JIT: Go may preempt the goroutine here
//		if stop { unreachable }
//	}
//
// A module without a memory (which the host refuses anyway) gets no
// memory.grow.
func loopCheck(stop, fuel uint32, memory bool) []byte {
	b := []byte{0x23}
	b = binary.AppendUvarint(b, uint64(fuel))
	b = append(b, 0x41, 0x01, 0x6b, 0x24) // i32.const 1, i32.sub, global.set
	b = binary.AppendUvarint(b, uint64(fuel))
	b = append(b, 0x23)
	b = binary.AppendUvarint(b, uint64(fuel))
	b = append(b, 0x45, 0x04, 0x40, 0x41) // i32.eqz, if, i32.const
	b = appendSLEB(b, fuelPerExit)
	b = append(b, 0x24)
	b = binary.AppendUvarint(b, uint64(fuel))
	if memory {
		b = append(b, 0x41, 0x00, 0x40, 0x00, 0x1a) // i32.const 0, memory.grow 0, drop
	}
	b = append(b, 0x23)
	b = binary.AppendUvarint(b, uint64(stop))
	return append(b, 0x04, 0x40, 0x00, 0x0b, 0x0b) // if, unreachable, end, end
}

func appendSLEB(b []byte, v int64) []byte {
	for {
		c := byte(v & 0x7f)
		v >>= 7
		if (v == 0 && c&0x40 == 0) || (v == -1 && c&0x40 != 0) {
			return append(b, c)
		}
		b = append(b, c|0x80)
	}
}

// Section ids (WebAssembly core 2.0, section 5.5.2).
const (
	secCustom = 0
	secImport = 2
	secMemory = 5
	secGlobal = 6
	secExport = 7
	secStart  = 8
	secCode   = 10
)

// sectionOrder is the order in which non-custom sections must appear: not
// their ids' (data count, 12, comes before code; tag, 13, before global).
var sectionOrder = map[byte]int{1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 13: 6, 6: 7, 7: 8, 8: 9, 9: 10, 12: 11, 10: 12, 11: 13}

var errBadModule = errors.New("malformed module")

// interruptible returns wasm with a stop flag: a new mutable i32 global,
// exported as stopExport, that every loop tests every fuelPerExit
// iterations (loopCheck), counting them in a second new global. A guest
// without loops runs for a bounded time anyway (its call depth is bounded by
// the stack). DWARF sections are dropped: their code offsets would no longer
// be right. It accepts the instruction set wazero's default features
// (WebAssembly 2.0) allow and refuses anything else, which wazero would
// refuse too.
func interruptible(wasm []byte) ([]byte, error) {
	if len(wasm) < 8 || !bytes.Equal(wasm[:4], []byte("\x00asm")) || binary.LittleEndian.Uint32(wasm[4:8]) != 1 {
		return nil, fmt.Errorf("%w: not a WebAssembly 1.0 binary", errBadModule)
	}
	type section struct {
		id      byte
		payload []byte
	}
	var secs []section
	r := &reader{b: wasm, off: 8}
	for r.more() {
		id := r.byte()
		n := r.u32()
		payload := r.take(int(n))
		if r.err != nil {
			return nil, fmt.Errorf("%w: section %d: %w", errBadModule, id, r.err)
		}
		if id != secCustom && sectionOrder[id] == 0 {
			return nil, fmt.Errorf("%w: unknown section id %d", errBadModule, id)
		}
		secs = append(secs, section{id, payload})
	}

	// The new globals' indices follow the imported and defined ones.
	var imported, defined uint32
	memory, hasStart := false, false
	var start uint32
	for _, s := range secs {
		switch s.id {
		case secImport:
			n, mem, err := imports(s.payload)
			if err != nil {
				return nil, err
			}
			imported, memory = n, memory || mem
		case secMemory:
			memory = memory || (len(s.payload) > 0 && s.payload[0] != 0)
		case secStart:
			r := &reader{b: s.payload}
			start, hasStart = r.u32(), true
			if r.err != nil {
				return nil, fmt.Errorf("%w: start section: %w", errBadModule, r.err)
			}
		case secGlobal:
			r := &reader{b: s.payload}
			defined = r.u32()
			if r.err != nil {
				return nil, fmt.Errorf("%w: global section: %w", errBadModule, r.err)
			}
		}
	}
	stop, fuel := imported+defined, imported+defined+1
	check := loopCheck(stop, fuel, memory)

	out := append([]byte(nil), wasm[:8]...)
	emit := func(id byte, payload []byte) {
		out = append(out, id)
		out = binary.AppendUvarint(out, uint64(len(payload)))
		out = append(out, payload...)
	}
	newGlobals := []byte{0x7f, 0x01, 0x41, 0x00, 0x0b, 0x7f, 0x01, 0x41} // stop: mut i32 = 0; fuel: mut i32 =
	newGlobals = appendSLEB(newGlobals, fuelPerExit)
	newGlobals = append(newGlobals, 0x0b)
	newExport := appendExport(nil, stopExport, 0x03, stop) // a global
	exports := uint64(1)
	if hasStart {
		newExport = appendExport(newExport, startExport, 0x00, start) // a function
		exports++
	}
	globalDone, exportDone := false, false
	// addMissing emits the global and export sections a module without
	// them needs, once the sections before theirs are out.
	addMissing := func(before int) {
		if !globalDone && before > sectionOrder[secGlobal] {
			emit(secGlobal, append([]byte{2}, newGlobals...))
			globalDone = true
		}
		if !exportDone && before > sectionOrder[secExport] {
			emit(secExport, append(binary.AppendUvarint(nil, exports), newExport...))
			exportDone = true
		}
	}
	for _, s := range secs {
		if s.id == secCustom {
			if name, ok := customName(s.payload); ok && strings.HasPrefix(name, ".debug_") {
				continue
			}
			emit(s.id, s.payload)
			continue
		}
		addMissing(sectionOrder[s.id])
		switch s.id {
		case secGlobal:
			p, err := appendToVec(s.payload, 2, newGlobals)
			if err != nil {
				return nil, fmt.Errorf("global section: %w", err)
			}
			emit(s.id, p)
			globalDone = true
		case secExport:
			if err := noExport(s.payload); err != nil {
				return nil, err
			}
			p, err := appendToVec(s.payload, exports, newExport)
			if err != nil {
				return nil, fmt.Errorf("export section: %w", err)
			}
			emit(s.id, p)
			exportDone = true
		case secStart:
			// exported as startExport instead
		case secCode:
			p, err := instrumentCode(s.payload, check)
			if err != nil {
				return nil, err
			}
			emit(s.id, p)
		default:
			emit(s.id, s.payload)
		}
	}
	addMissing(len(sectionOrder) + 1)
	return out, nil
}

// imports counts the globals an import section imports, and says whether
// it imports a memory.
func imports(p []byte) (globals uint32, memory bool, err error) {
	r := &reader{b: p}
	for range r.count() {
		r.name()
		r.name()
		switch kind := r.byte(); kind {
		case 0x00: // function: type index
			r.u32()
		case 0x01: // table: reference type, limits
			r.byte()
			r.limits()
		case 0x02: // memory: limits
			r.limits()
			memory = true
		case 0x03: // global: value type, mutability
			r.byte()
			r.byte()
			globals++
		default:
			return 0, false, fmt.Errorf("%w: import kind %d", errBadModule, kind)
		}
		if r.err != nil {
			break
		}
	}
	if r.err != nil {
		return 0, false, fmt.Errorf("%w: import section: %w", errBadModule, r.err)
	}
	return globals, memory, nil
}

// noExport refuses an export section that already has a name the rewrite
// adds.
func noExport(p []byte) error {
	r := &reader{b: p}
	for range r.count() {
		if name := r.name(); name == stopExport || name == startExport {
			return fmt.Errorf("%w: exports %q, a name the host reserves", errBadModule, name)
		}
		r.byte()
		r.u32()
		if r.err != nil {
			break
		}
	}
	if r.err != nil {
		return fmt.Errorf("%w: export section: %w", errBadModule, r.err)
	}
	return nil
}

// appendExport appends an export entry: its name, kind and index.
func appendExport(b []byte, name string, kind byte, index uint32) []byte {
	b = binary.AppendUvarint(b, uint64(len(name)))
	b = append(b, name...)
	b = append(b, kind)
	return binary.AppendUvarint(b, uint64(index))
}

// appendToVec adds n encoded entries to a section that is a vector.
func appendToVec(p []byte, n uint64, entries []byte) ([]byte, error) {
	r := &reader{b: p}
	had := r.u32()
	if r.err != nil {
		return nil, fmt.Errorf("%w: %w", errBadModule, r.err)
	}
	out := binary.AppendUvarint(nil, uint64(had)+n)
	out = append(out, p[r.off:]...)
	return append(out, entries...), nil
}

func customName(p []byte) (string, bool) {
	r := &reader{b: p}
	name := r.name()
	return name, r.err == nil
}

// instrumentCode puts check at the top of every loop of every function
// body in a code section.
func instrumentCode(p, check []byte) ([]byte, error) {
	r := &reader{b: p}
	n := r.count()
	out := binary.AppendUvarint(nil, uint64(n))
	var body []byte
	for i := range n {
		b := r.take(int(r.u32()))
		if r.err != nil {
			return nil, fmt.Errorf("%w: code section: %w", errBadModule, r.err)
		}
		var err error
		body, err = instrumentBody(body[:0], b, check)
		if err != nil {
			return nil, fmt.Errorf("%w: function body %d: %w", errBadModule, i, err)
		}
		out = binary.AppendUvarint(out, uint64(len(body)))
		out = append(out, body...)
	}
	if r.more() {
		return nil, fmt.Errorf("%w: code section: %d bytes after the last body", errBadModule, len(p)-r.off)
	}
	return out, nil
}

// instrumentBody appends b to out with check after every loop's block type.
// It decodes each instruction only far enough to find where the next one
// starts.
func instrumentBody(out, b, check []byte) ([]byte, error) {
	r := &reader{b: b}
	for range r.count() { // locals: count, type
		r.u32()
		r.byte()
	}
	from := 0 // b[from:r.off] is yet to be copied
	for r.more() && r.err == nil {
		at := r.off
		op := r.byte()
		switch {
		case op == 0x02 || op == 0x04: // block, if
			r.leb(5)
		case op == 0x03: // loop
			r.leb(5)
			out = append(out, b[from:r.off]...)
			out = append(out, check...)
			from = r.off
		case op == 0x0c || op == 0x0d: // br, br_if
			r.u32()
		case op == 0x0e: // br_table
			for range r.count() {
				r.u32()
			}
			r.u32()
		case op == 0x10: // call
			r.u32()
		case op == 0x11: // call_indirect: type, table
			r.u32()
			r.u32()
		case op == 0x1c: // select with types
			r.take(int(r.u32()))
		case op >= 0x20 && op <= 0x26: // locals, globals, table.get/set
			r.u32()
		case op >= 0x28 && op <= 0x3e: // loads and stores: align, offset
			r.u32()
			r.u32()
		case op == 0x3f || op == 0x40: // memory.size, memory.grow
			r.u32()
		case op == 0x41:
			r.leb(5)
		case op == 0x42:
			r.leb(10)
		case op == 0x43:
			r.take(4)
		case op == 0x44:
			r.take(8)
		case op == 0xd0: // ref.null t
			r.byte()
		case op == 0xd2: // ref.func
			r.u32()
		case op == 0xfc:
			miscImmediates(r, r.u32())
		case op == 0xfd:
			simdImmediates(r, r.u32())
		case op <= 0x01, op == 0x05, op == 0x0b, op == 0x0f, op == 0x1a, op == 0x1b,
			op >= 0x45 && op <= 0xc4, op == 0xd1:
			// no immediates
		default:
			return nil, fmt.Errorf("instruction 0x%02x at byte %d is not in WebAssembly 2.0", op, at)
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	return append(out, b[from:]...), nil
}

// miscImmediates skips the immediates of a 0xfc instruction.
func miscImmediates(r *reader, sub uint32) {
	switch {
	case sub <= 7: // saturating truncations
	case sub == 8, sub == 10, sub == 12, sub == 14: // memory.init, memory.copy, table.init, table.copy
		r.u32()
		r.u32()
	case sub <= 17: // data.drop, memory.fill, elem.drop, table.grow/size/fill
		r.u32()
	default:
		r.fail(fmt.Errorf("instruction 0xfc %d is not in WebAssembly 2.0", sub))
	}
}

// simdImmediates skips the immediates of a 0xfd (vector) instruction.
func simdImmediates(r *reader, sub uint32) {
	switch {
	case sub <= 11, sub == 92, sub == 93: // loads and stores
		r.u32()
		r.u32()
	case sub == 12, sub == 13: // v128.const, i8x16.shuffle
		r.take(16)
	case sub >= 21 && sub <= 34: // extract and replace lane
		r.byte()
	case sub >= 84 && sub <= 91: // load and store lane
		r.u32()
		r.u32()
		r.byte()
	case sub <= 255:
		// no immediates
	default:
		r.fail(fmt.Errorf("instruction 0xfd %d is not in WebAssembly 2.0", sub))
	}
}

// reader decodes a WebAssembly binary. The first error sticks: later reads
// return zeros, so a caller checks err once, after a run of reads.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) more() bool { return r.err == nil && r.off < len(r.b) }

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
	r.off = len(r.b)
}

func (r *reader) byte() byte {
	if r.off >= len(r.b) {
		r.fail(errors.New("unexpected end"))
		return 0
	}
	c := r.b[r.off]
	r.off++
	return c
}

func (r *reader) take(n int) []byte {
	if n < 0 || n > len(r.b)-r.off {
		r.fail(errors.New("unexpected end"))
		return nil
	}
	p := r.b[r.off : r.off+n]
	r.off += n
	return p
}

// u32 reads an unsigned LEB128 of at most 32 bits.
func (r *reader) u32() uint32 {
	var v uint32
	for i := 0; i < 5; i++ {
		c := r.byte()
		if r.err != nil {
			return 0
		}
		v |= uint32(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			if i == 4 && c > 0x0f {
				r.fail(errors.New("u32 out of range"))
				return 0
			}
			return v
		}
	}
	r.fail(errors.New("u32 longer than 5 bytes"))
	return 0
}

// leb skips a LEB128 number of at most max bytes (a signed immediate or a
// block type, whose value does not matter here).
func (r *reader) leb(max int) {
	for range max {
		c := r.byte()
		if r.err != nil || c&0x80 == 0 {
			return
		}
	}
	r.fail(fmt.Errorf("LEB128 longer than %d bytes", max))
}

// count reads a vector's length, refusing one longer than the bytes left
// (every element takes at least one), so that a loop over it is bounded.
func (r *reader) count() uint32 {
	n := r.u32()
	if r.err == nil && int64(n) > int64(len(r.b)-r.off) {
		r.fail(errors.New("vector longer than its section"))
		return 0
	}
	return n
}

func (r *reader) name() string { return string(r.take(int(r.u32()))) }

func (r *reader) limits() {
	if r.byte()&1 != 0 {
		r.u32()
	}
	r.u32()
}
