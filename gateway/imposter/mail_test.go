package imposter

import (
	"bufio"
	"bytes"
	"testing"

	"github.com/riftgate/riftgate/gateway/message"
)

// FuzzParseMail holds the message parser to never panicking, whatever a
// client sends after DATA, and to recording every attachment's size.
func FuzzParseMail(f *testing.F) {
	f.Add([]byte("From: a@b\r\nTo: c@d\r\nSubject: hi\r\n\r\nbody\r\n"))
	f.Add([]byte("Content-Type: multipart/mixed; boundary=x\r\n\r\n--x\r\nContent-Disposition: attachment; filename=a.bin\r\nContent-Transfer-Encoding: base64\r\n\r\nAAE=\r\n--x--\r\n"))
	f.Add([]byte("Content-Type: multipart/related; boundary=x\r\n\r\n--x\r\nContent-Type: image/png\r\nContent-Id: <i>\r\n\r\n\x00\r\n--x--"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		m := parseMail(raw)
		for _, a := range m.Attachments {
			if a["size"].(int) != len(a["content"].([]byte)) {
				t.Fatalf("size %v of %d bytes", a["size"], len(a["content"].([]byte)))
			}
		}
		req := &message.Request{Kind: message.SMTP, Mail: m}
		if _, err := req.MarshalJSON(); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzReadData holds DATA's reader to undoing exactly the dot stuffing a
// client adds.
func FuzzReadData(f *testing.F) {
	f.Add([]byte("a\r\n.b\r\n"))
	f.Add([]byte(".\r\n..\r\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		if bytes.ContainsAny(body, "\r") {
			return // lines are CRLF-terminated below
		}
		lines := bytes.Split(body, []byte("\n"))
		var wire, want bytes.Buffer
		for _, l := range lines {
			if len(l) > 0 && l[0] == '.' {
				wire.WriteByte('.')
			}
			wire.Write(l)
			wire.WriteString("\r\n")
			want.Write(l)
			want.WriteString("\r\n")
		}
		wire.WriteString(".\r\n")
		got, err := readData(bufio.NewReader(&wire), 1<<20)
		if err != nil || !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("readData(%q) = %q, %v; want %q", wire.String(), got, err, want.String())
		}
	})
}
