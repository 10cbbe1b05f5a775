package e2e_test

import (
	"crypto/tls"
	"encoding/json"
	"net/smtp"
	"reflect"
	"strconv"
	"testing"

	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

// testMail is a multipart message with every field mb records.
const testMail = "From: \"Sender Name\" <sender@example.com>\r\n" +
	"To: First <a@example.com>, b@example.com\r\n" +
	"To: second@example.com\r\n" +
	"Cc: c@example.com\r\n" +
	"Subject: =?utf-8?q?H=C3=A9llo?= there\r\n" +
	"References: <ref1@x> ref2@x\r\n" +
	"In-Reply-To: <ref2@x>\r\n" +
	"X-Priority: 1\r\n" +
	"MIME-Version: 1.0\r\n" +
	"Content-Type: multipart/mixed; boundary=\"outer\"\r\n" +
	"\r\n" +
	"--outer\r\n" +
	"Content-Type: multipart/alternative; boundary=\"inner\"\r\n" +
	"\r\n" +
	"--inner\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\n" +
	"Content-Transfer-Encoding: quoted-printable\r\n" +
	"\r\n" +
	"Plain body =C3=A9\r\n" +
	"..a dotted line\r\n" +
	"\r\n" +
	"--inner\r\n" +
	"Content-Type: text/html; charset=utf-8\r\n" +
	"\r\n" +
	"<p>HTML body</p>\r\n" +
	"--inner--\r\n" +
	"--outer\r\n" +
	"Content-Type: application/octet-stream\r\n" +
	"Content-Disposition: attachment; filename=\"f.pdf\"\r\n" +
	"Content-Transfer-Encoding: base64\r\n" +
	"\r\n" +
	"AAFiaW5h\r\ncnk=\r\n" +
	"--outer\r\n" +
	"Content-Type: text/plain\r\n" +
	"Content-Disposition: attachment; filename=\"notes.txt\"\r\n" +
	"\r\n" +
	"a text file\r\n" +
	"--outer--\r\n"

// sendMail delivers msg to the smtp imposter on port with net/smtp, from
// the envelope sender to the recipients; tlsOn says to STARTTLS first.
func sendMail(t *testing.T, port int, from string, to []string, msg string, tlsOn bool) {
	t.Helper()
	c, err := smtp.Dial("127.0.0.1:" + strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Hello("client.test"); err != nil {
		t.Fatal(err)
	}
	if tlsOn {
		if ok, _ := c.Extension("STARTTLS"); !ok {
			t.Fatal("STARTTLS is not offered, as mb offers it")
		}
		if err := c.StartTLS(&tls.Config{InsecureSkipVerify: true}); err != nil { //nolint:gosec // the imposter's self-signed pair
			t.Fatal(err)
		}
	}
	if err := c.Mail(from); err != nil {
		t.Fatal(err)
	}
	for _, r := range to {
		if err := c.Rcpt(r); err != nil {
			t.Fatal(err)
		}
	}
	w, err := c.Data()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatalf("the message is not accepted: %v", err)
	}
	if err := c.Quit(); err != nil {
		t.Fatal(err)
	}
}

func TestSMTPImposterRecordsMail(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(`{"protocol":"smtp","recordRequests":true}`)
	sendMail(t, port, "env@example.com", []string{"r1@example.com", "r2@example.com"}, testMail, false)
	sendMail(t, port, "e@x", []string{"t@x"}, "From: x@y\r\n\r\nonly text\r\n", true)

	imp := getImposter(t, rg.URL, port, "")
	if imp["numberOfRequests"] != float64(2) {
		t.Fatalf("numberOfRequests: %v", imp["numberOfRequests"])
	}
	if _, ok := imp["mode"]; ok {
		t.Fatal("an smtp imposter has no mode")
	}
	reqs := imp["requests"].([]any)
	r := reqs[0].(map[string]any)
	want := map[string]any{
		"requestFrom":  "127.0.0.1",
		"ip":           "127.0.0.1",
		"envelopeFrom": "env@example.com",
		"envelopeTo":   []any{"r1@example.com", "r2@example.com"},
		"from":         map[string]any{"address": "sender@example.com", "name": "Sender Name"},
		// mb keeps the first address of each To header.
		"to":         []any{map[string]any{"address": "a@example.com", "name": "First"}, map[string]any{"address": "second@example.com", "name": ""}},
		"cc":         []any{map[string]any{"address": "c@example.com", "name": ""}},
		"bcc":        []any{},
		"subject":    "Héllo there",
		"priority":   "normal",
		"references": []any{"<ref1@x>", "<ref2@x>"},
		"inReplyTo":  "<ref2@x>",
		"text":       "Plain body é\n..a dotted line",
		"html":       "<p>HTML body</p>",
	}
	for k, v := range want {
		if !reflect.DeepEqual(r[k], v) {
			t.Errorf("%s: %#v, want %#v", k, r[k], v)
		}
	}
	atts := r["attachments"].([]any)
	if len(atts) != 2 {
		t.Fatalf("attachments: %v", atts)
	}
	pdf := atts[0].(map[string]any)
	if pdf["contentType"] != "application/pdf" || pdf["filename"] != "f.pdf" || pdf["size"] != float64(8) ||
		pdf["partId"] != "2" || pdf["checksum"] != "0a3618d886b265f5986c91890c53f18d" {
		t.Errorf("attachment: %v", pdf)
	}
	second := reqs[1].(map[string]any)
	if second["text"] != "only text" || second["html"] != "" || len(second["to"].([]any)) != 0 {
		t.Errorf("a plain message over STARTTLS: %v", second)
	}
	if _, ok := second["subject"]; ok {
		t.Error("a message without a subject has none, as mailparser leaves it undefined")
	}
}

// TestSMTPMatchesMountebank delivers the same mail to mb 2.9.1 and
// riftgate and compares the recorded requests.
func TestSMTPMatchesMountebank(t *testing.T) {
	mb := mountebank(t)
	rg := gatewaytest.Start(t)
	def := `{"protocol":"smtp","recordRequests":true}`
	mp, rp := postTo(t, mb, def), postTo(t, rg.URL, def)
	for _, p := range []int{mp, rp} {
		sendMail(t, p, "env@example.com", []string{"r1@example.com"}, testMail, false)
		sendMail(t, p, "e@x", []string{"t@x", "u@x"}, "From: x@y\r\nSubject: s\r\n\r\nline one\r\nline two\r\n", false)
	}
	want, got := stable(getImposter(t, mb, mp, "")), stable(getImposter(t, rg.URL, rp, ""))
	if !reflect.DeepEqual(got, want) {
		wb, _ := json.MarshalIndent(want, "", " ")
		gb, _ := json.MarshalIndent(got, "", " ")
		t.Fatalf("smtp imposter:\nriftgate %s\nmb %s", gb, wb)
	}
	for _, q := range []string{"?replayable=true"} {
		if w, g := stable(getImposter(t, mb, mp, q)), stable(getImposter(t, rg.URL, rp, q)); !reflect.DeepEqual(g, w) {
			t.Fatalf("smtp imposter%s: riftgate %v, mb %v", q, g, w)
		}
	}
}
