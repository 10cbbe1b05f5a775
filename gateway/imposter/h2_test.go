package imposter

import (
	"bytes"
	"io"
	"testing"
	"testing/iotest"
)

// chunked reads data in pieces of the given sizes (cycled), as segments
// arrive.
type chunked struct {
	data  []byte
	sizes []byte
	i     int
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := len(c.data)
	if len(c.sizes) > 0 {
		n = min(n, int(c.sizes[c.i%len(c.sizes)])+1)
		c.i++
	}
	n = copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

func TestReadPreface(t *testing.T) {
	for _, tt := range []struct {
		name  string
		data  string
		sizes []byte
		h2    bool
		n     int
	}{
		{"http/1.1", "GET / HTTP/1.1\r\nHost: x\r\n\r\n", nil, false, 27},
		{"POST starts like PRI", "POST / HTTP/1.1\r\n\r\n", []byte{0}, false, 2},
		{"preface whole", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00", nil, true, 26},
		{"preface byte by byte", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", []byte{0}, true, 24},
		{"preface cut short", "PRI * HTTP/2.0\r\n", []byte{3}, false, 16},
		{"PRI with another version", "PRI * HTTP/1.1\r\n\r\n", nil, false, 18},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := make([]byte, 4096)
			n, h2, _ := readPreface(&chunked{data: []byte(tt.data), sizes: tt.sizes}, p)
			if h2 != tt.h2 || n != tt.n || !bytes.Equal(p[:n], []byte(tt.data)[:n]) {
				t.Errorf("n %d h2 %v, want %d %v", n, h2, tt.n, tt.h2)
			}
		})
	}
	// A reader that fails is HTTP/1.1's to report.
	if _, h2, err := readPreface(iotest.ErrReader(io.ErrUnexpectedEOF), make([]byte, 64)); h2 || err == nil {
		t.Errorf("an error: h2 %v err %v", h2, err)
	}
}

// FuzzReadPreface: whatever the bytes and however they are cut, the
// connection is HTTP/2 exactly when it starts with the preface, and the
// bytes read are the connection's, in order.
func FuzzReadPreface(f *testing.F) {
	f.Add([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), []byte{0, 5})
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"), []byte{})
	f.Add([]byte("PRI * HTTP/2.0\r\n\r\nSX"), []byte{1})
	f.Fuzz(func(t *testing.T, data, sizes []byte) {
		p := make([]byte, 4096)
		n, h2, _ := readPreface(&chunked{data: bytes.Clone(data), sizes: sizes}, p)
		if n > len(data) || !bytes.Equal(p[:n], data[:n]) {
			t.Fatalf("read %q of %q", p[:n], data)
		}
		if want := bytes.HasPrefix(data, h2Preface); h2 != want {
			t.Fatalf("h2 %v for %q", h2, data)
		}
		if !h2 && n < len(data) && n < len(h2Preface) && bytes.HasPrefix(h2Preface, data[:n]) {
			t.Fatalf("stopped at %d bytes of a preface's start", n)
		}
	})
}
