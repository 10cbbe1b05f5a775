package wsproto

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf8"
)

var testMask = &[4]byte{0x12, 0x34, 0x56, 0x78}

// frames concatenates client (masked) frames.
func frames(fs ...[]byte) []byte { return bytes.Join(fs, nil) }

func frag(fin bool, op byte, p string) []byte {
	return AppendFragment(nil, fin, op, []byte(p), testMask)
}

type read struct {
	op   byte
	data string
	code int // a ProtocolError's close code, or 0
}

func TestReaderNext(t *testing.T) {
	big := strings.Repeat("x", 70000)
	tests := []struct {
		name  string
		in    []byte
		max   int
		reads []read
	}{
		{"text", frag(true, OpText, "hello"), 0, []read{{op: OpText, data: "hello"}}},
		{"binary", frag(true, OpBinary, "\x00\x01\xff"), 0, []read{{op: OpBinary, data: "\x00\x01\xff"}}},
		{"empty text", frag(true, OpText, ""), 0, []read{{op: OpText, data: ""}}},
		{"16-bit length", frag(true, OpBinary, strings.Repeat("a", 300)), 0, []read{{op: OpBinary, data: strings.Repeat("a", 300)}}},
		{"64-bit length", frag(true, OpText, big), 0, []read{{op: OpText, data: big}}},
		{"fragments joined", frames(frag(false, OpText, "hel"), frag(false, OpContinuation, "l"), frag(true, OpContinuation, "o")), 0,
			[]read{{op: OpText, data: "hello"}}},
		{"ping between fragments", frames(frag(false, OpText, "a"), frag(true, OpPing, "p"), frag(true, OpContinuation, "b")), 0,
			[]read{{op: OpPing, data: "p"}, {op: OpText, data: "ab"}}},
		{"two messages", frames(frag(true, OpText, "one"), frag(true, OpBinary, "two")), 0,
			[]read{{op: OpText, data: "one"}, {op: OpBinary, data: "two"}}},
		{"close with code", AppendClose(nil, 1000, "bye", testMask), 0, []read{{op: OpClose, data: "\x03\xe8bye"}}},
		{"close without code", frag(true, OpClose, ""), 0, []read{{op: OpClose, data: ""}}},
		{"a rune split across fragments", frames(frag(false, OpText, "\xc3"), frag(true, OpContinuation, "\xa9")), 0,
			[]read{{op: OpText, data: "é"}}},
		{"invalid utf-8", frag(true, OpText, "\xff"), 0, []read{{code: CloseInvalidData}}},
		{"too big", frag(true, OpText, "12345"), 4, []read{{code: CloseTooBig}}},
		{"too big across fragments", frames(frag(false, OpText, "123"), frag(true, OpContinuation, "45")), 4, []read{{code: CloseTooBig}}},
		{"continuation first", frag(true, OpContinuation, "x"), 0, []read{{code: CloseProtocolError}}},
		{"new message inside a fragmented one", frames(frag(false, OpText, "a"), frag(true, OpText, "b")), 0, []read{{code: CloseProtocolError}}},
		{"unmasked client frame", AppendFrame(nil, OpText, []byte("x"), nil), 0, []read{{code: CloseProtocolError}}},
		{"reserved bit", func() []byte { b := frag(true, OpText, "x"); b[0] |= 0x40; return b }(), 0, []read{{code: CloseProtocolError}}},
		{"unknown opcode", frag(true, 0x3, "x"), 0, []read{{code: CloseProtocolError}}},
		{"fragmented ping", frag(false, OpPing, "x"), 0, []read{{code: CloseProtocolError}}},
		{"long ping", frag(true, OpPing, strings.Repeat("p", 126)), 0, []read{{code: CloseProtocolError}}},
		{"close code 1005 sent", AppendClose(nil, 1005, "", testMask), 0, []read{{code: CloseProtocolError}}},
		{"close one byte", frag(true, OpClose, "\x03"), 0, []read{{code: CloseProtocolError}}},
		{"close reason not utf-8", frag(true, OpClose, "\x03\xe8\xff"), 0, []read{{code: CloseInvalidData}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rd := NewReader(bufio.NewReader(bytes.NewReader(tt.in)), true, tt.max)
			for i, want := range tt.reads {
				op, p, err := rd.Next()
				if want.code != 0 {
					var pe *ProtocolError
					if !errors.As(err, &pe) || pe.Code != want.code {
						t.Fatalf("read %d: err %v, want close code %d", i, err, want.code)
					}
					return
				}
				if err != nil || op != want.op || string(p) != want.data {
					t.Fatalf("read %d: %#x %q %v, want %#x %q", i, op, truncate(string(p)), err, want.op, truncate(want.data))
				}
			}
			if _, _, err := rd.Next(); err != io.EOF {
				t.Fatalf("after the last message: %v, want EOF", err)
			}
		})
	}
}

func TestReaderTruncated(t *testing.T) {
	whole := frag(true, OpBinary, strings.Repeat("z", 200))
	for n := 1; n < len(whole); n++ {
		rd := NewReader(bytes.NewReader(whole[:n]), true, 0)
		if _, _, err := rd.Next(); err != io.ErrUnexpectedEOF {
			t.Fatalf("cut at %d: %v, want ErrUnexpectedEOF", n, err)
		}
	}
}

func TestServerFramesUnmasked(t *testing.T) {
	b := AppendFrame(nil, OpText, []byte("hi"), nil)
	if !bytes.Equal(b, []byte{0x81, 2, 'h', 'i'}) {
		t.Fatalf("server frame % x", b)
	}
	rd := NewReader(bytes.NewReader(b), false, 0)
	if op, p, err := rd.Next(); err != nil || op != OpText || string(p) != "hi" {
		t.Fatalf("client reads %#x %q %v", op, p, err)
	}
	rd = NewReader(bytes.NewReader(AppendFrame(nil, OpText, []byte("hi"), testMask)), false, 0)
	if _, _, err := rd.Next(); err == nil {
		t.Fatal("a client took a masked server frame")
	}
}

func TestUnmaskMatchesBytewise(t *testing.T) {
	key := [4]byte{1, 2, 3, 4}
	for n := 0; n < 70; n++ {
		for pos := 0; pos < 4; pos++ {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(i * 7)
			}
			want := bytes.Clone(b)
			for i := range want {
				want[i] ^= key[(pos+i)&3]
			}
			if unmask(b, key, pos); !bytes.Equal(b, want) {
				t.Fatalf("n=%d pos=%d", n, pos)
			}
		}
	}
}

func TestAppendCloseTruncatesReason(t *testing.T) {
	b := AppendClose(nil, 4000, strings.Repeat("é", 100), nil)
	p := b[2:]
	if len(p) > maxControl || binary.BigEndian.Uint16(p) != 4000 {
		t.Fatalf("close payload %d bytes", len(p))
	}
	if err := checkClose(p); err != nil {
		t.Fatal(err)
	}
}

func TestReadRequest(t *testing.T) {
	tests := []struct {
		name, in string
		ok       bool
		headers  int
	}{
		{"crlf", "GET /chat?x=1 HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n", true, 2},
		{"lf", "GET / HTTP/1.1\nHost: a\n\n", true, 1},
		{"bad line", "GET /\r\n\r\n", false, 0},
		{"http/2", "GET / HTTP/2\r\n\r\n", false, 0},
		{"no colon", "GET / HTTP/1.1\r\nHost a\r\n\r\n", false, 0},
		{"folded", "GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n", false, 0},
		{"cut", "GET / HTTP/1.1\r\nHost: a\r\n", false, 0},
		{"too long", "GET / HTTP/1.1\r\nX: " + strings.Repeat("a", MaxHeadBytes) + "\r\n\r\n", false, 0},
		{"too many", "GET / HTTP/1.1\r\n" + strings.Repeat("X: y\r\n", MaxHeaders+1) + "\r\n", false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ReadRequest(bufio.NewReader(strings.NewReader(tt.in)))
			if (err == nil) != tt.ok {
				t.Fatalf("err %v, want ok=%v", err, tt.ok)
			}
			if tt.ok && len(r.Headers) != tt.headers {
				t.Fatalf("%d headers", len(r.Headers))
			}
		})
	}
}

func TestCheckUpgrade(t *testing.T) {
	ok := []Header{{"Connection", "keep-alive, Upgrade"}, {"Upgrade", "websocket"}, {"Sec-WebSocket-Version", "13"}, {"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="}}
	tests := []struct {
		name   string
		method string
		drop   string
		status int
	}{
		{"valid", "GET", "", 0},
		{"post", "POST", "", 405},
		{"no upgrade", "GET", "Upgrade", 426},
		{"no version", "GET", "Sec-WebSocket-Version", 426},
		{"no key", "GET", "Sec-WebSocket-Key", 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Request{Method: tt.method}
			for _, h := range ok {
				if h.Name != tt.drop {
					r.Headers = append(r.Headers, h)
				}
			}
			key, err := CheckUpgrade(r.Method, r.Get, r.Values)
			var he *HandshakeError
			switch {
			case tt.status == 0 && (err != nil || key == ""):
				t.Fatalf("refused: %v", err)
			case tt.status != 0 && (!errors.As(err, &he) || he.Status != tt.status):
				t.Fatalf("err %v, want status %d", err, tt.status)
			}
		})
	}
	// RFC 6455 §1.3's example.
	if got := AcceptKey("dGhlIHNhbXBsZSBub25jZQ=="); got != "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" {
		t.Fatalf("accept key %q", got)
	}
}

func FuzzReader(f *testing.F) {
	f.Add(frag(true, OpText, "hello"), 0)
	f.Add(frames(frag(false, OpText, "a"), frag(true, OpPing, "p"), frag(true, OpContinuation, "b")), 0)
	f.Add(AppendClose(nil, 1000, "bye", testMask), 16)
	f.Add(frag(true, OpBinary, strings.Repeat("x", 300)), 100)
	f.Fuzz(func(t *testing.T, in []byte, max int) {
		if max < 0 {
			max = -max
		}
		rd := NewReader(bytes.NewReader(in), true, max%(1<<20))
		for i := 0; i < 64; i++ {
			op, p, err := rd.Next()
			if err != nil {
				return
			}
			switch op {
			case OpText:
				if !utf8.Valid(p) {
					t.Fatalf("text message not UTF-8: %q", p)
				}
			case OpClose, OpPing, OpPong:
				if len(p) > maxControl {
					t.Fatalf("control payload of %d bytes", len(p))
				}
			case OpBinary:
			default:
				t.Fatalf("Next returned opcode %#x", op)
			}
			if rd.MaxMessage > 0 && op <= OpBinary && len(p) > rd.MaxMessage {
				t.Fatalf("message of %d bytes over the limit %d", len(p), rd.MaxMessage)
			}
		}
	})
}

func FuzzReadRequest(f *testing.F) {
	f.Add("GET /chat?x=1 HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n")
	f.Add("GET / HTTP/1.1\nA:\n\n")
	f.Fuzz(func(t *testing.T, in string) {
		r, err := ReadRequest(bufio.NewReader(strings.NewReader(in)))
		if err != nil {
			return
		}
		if len(r.Headers) > MaxHeaders {
			t.Fatalf("%d headers", len(r.Headers))
		}
		for _, h := range r.Headers {
			if h.Name == "" || strings.ContainsAny(h.Name, "\r\n") || strings.ContainsAny(h.Value, "\r\n") {
				t.Fatalf("header %q", h)
			}
		}
	})
}
