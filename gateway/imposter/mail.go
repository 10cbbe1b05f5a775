package imposter

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"net/textproto"
	"path"
	"regexp"
	"strconv"
	"strings"

	"github.com/riftgate/riftgate/gateway/message"
)

// maxMailDepth bounds multipart nesting.
const maxMailDepth = 16

// parseMail reads a message as mb's smtpRequest sees it through
// mailparser: the first address of each From, To, Cc and Bcc header,
// the decoded subject, references and in-reply-to ids, the text and html
// parts (trimmed), and the attachments. A message that does not parse
// keeps what was read before the fault.
func parseMail(raw []byte) *message.Mail {
	m := &message.Mail{}
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return m
	}
	h := textproto.MIMEHeader(msg.Header)
	dec := new(mime.WordDecoder)
	if from := firstAddresses(h["From"], dec); len(from) > 0 {
		m.From = from[0]
	}
	m.To = firstAddresses(h["To"], dec)
	m.Cc = firstAddresses(h["Cc"], dec)
	m.Bcc = firstAddresses(h["Bcc"], dec)
	if v, ok := h["Subject"]; ok && len(v) > 0 {
		s := decodeWords(dec, strings.TrimSpace(v[len(v)-1]))
		m.Subject, m.HasSubject = s, s != ""
	}
	m.References = messageIDs(h["References"], dec, false)
	m.InReplyTo = messageIDs(h["In-Reply-To"], dec, true)
	var text, html []string
	walkPart(m, h, msg.Body, "", false, 0, &text, &html)
	m.Text = strings.TrimSpace(strings.Join(text, "\n"))
	m.HTML = strings.TrimSpace(strings.Join(html, "<br/>\n"))
	if m.Text == "" && m.HTML != "" {
		m.Text = strings.TrimSpace(htmlToText(m.HTML))
	}
	return m
}

// firstAddresses is mb's addressValues: one address per header, the first
// of its list, name decoded.
func firstAddresses(headers []string, dec *mime.WordDecoder) []message.Address {
	out := []message.Address{}
	for _, v := range headers {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		list, err := (&mail.AddressParser{WordDecoder: dec}).ParseList(v)
		if err != nil || len(list) == 0 {
			out = append(out, message.Address{Address: v})
			continue
		}
		out = append(out, message.Address{Address: list[0].Address, Name: list[0].Name})
	}
	return out
}

// messageIDs reads References (every id, whitespace separated) or
// In-Reply-To (one id) as mailparser does: each id in angle brackets; one
// id is a string, several an array; none is absent (nil).
func messageIDs(headers []string, dec *mime.WordDecoder, single bool) any {
	var ids []string
	for _, v := range headers {
		v = decodeWords(dec, strings.TrimSpace(v))
		if v == "" {
			continue
		}
		if single {
			ids = []string{angle(v)} // the last header wins
			continue
		}
		for _, id := range strings.Fields(v) {
			ids = append(ids, angle(id))
		}
	}
	switch len(ids) {
	case 0:
		return nil
	case 1:
		return ids[0]
	}
	return ids
}

func angle(id string) string {
	if !strings.HasPrefix(id, "<") {
		id = "<" + id
	}
	if !strings.HasSuffix(id, ">") {
		id += ">"
	}
	return id
}

func decodeWords(dec *mime.WordDecoder, s string) string {
	if out, err := dec.DecodeHeader(s); err == nil {
		return out
	}
	return s
}

// walkPart collects a part's text, html and attachments; partID is
// mailparser's ("1.2": the second child of the first child).
func walkPart(m *message.Mail, h textproto.MIMEHeader, body io.Reader, partID string, related bool, depth int, text, html *[]string) {
	ctype, params, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil {
		ctype, params = "text/plain", map[string]string{}
	}
	if strings.HasPrefix(ctype, "multipart/") && depth < maxMailDepth {
		mr := multipart.NewReader(body, params["boundary"])
		for i := 1; ; i++ {
			p, err := mr.NextRawPart()
			if err != nil {
				return
			}
			id := strconv.Itoa(i)
			if partID != "" {
				id = partID + "." + id
			}
			walkPart(m, p.Header, p, id, related || ctype == "multipart/related", depth+1, text, html)
		}
	}
	content, _ := io.ReadAll(decodeTransfer(h.Get("Content-Transfer-Encoding"), body))
	disp, dparams, _ := mime.ParseMediaType(h.Get("Content-Disposition"))
	filename := dparams["filename"]
	if filename == "" {
		filename = params["name"]
	}
	isText := ctype == "text/plain" || ctype == "text/html"
	if isText && disp != "attachment" {
		s := strings.ReplaceAll(toUTF8(content, params["charset"]), "\r\n", "\n")
		if ctype == "text/html" {
			*html = append(*html, s)
		} else {
			*text = append(*text, s)
		}
		return
	}
	if ctype == "application/octet-stream" && filename != "" {
		if t := mime.TypeByExtension(path.Ext(filename)); t != "" {
			ctype, _, _ = mime.ParseMediaType(t)
		}
	}
	sum := md5.Sum(content)
	a := map[string]any{
		"type":        "attachment",
		"content":     content,
		"contentType": ctype,
		"partId":      nil,
		"release":     nil,
		"headers":     map[string]any{},
		"checksum":    hex.EncodeToString(sum[:]),
		"size":        len(content),
	}
	if partID != "" {
		a["partId"] = partID
	}
	if disp != "" {
		a["contentDisposition"] = disp
	}
	if filename != "" {
		a["filename"] = filename
	}
	if cid := strings.TrimSpace(h.Get("Content-Id")); cid != "" {
		a["contentId"] = cid
		a["cid"] = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(cid, "<"), ">"))
		if related {
			a["related"] = true
		}
	}
	m.Attachments = append(m.Attachments, a)
}

func decodeTransfer(enc string, r io.Reader) io.Reader {
	switch strings.ToLower(strings.TrimSpace(enc)) {
	case "base64":
		return base64.NewDecoder(base64.StdEncoding, &base64Clean{r: r})
	case "quoted-printable":
		return quotedprintable.NewReader(r)
	}
	return r
}

// base64Clean drops what a base64 body holds besides its alphabet (line
// breaks), which the decoder would refuse.
type base64Clean struct{ r io.Reader }

func (b *base64Clean) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	j := 0
	for _, c := range p[:n] {
		if c != '\r' && c != '\n' && c != ' ' && c != '\t' {
			p[j] = c
			j++
		}
	}
	return j, err
}

// toUTF8 converts a text part to UTF-8: latin-1 is widened, every other
// charset is taken as UTF-8.
func toUTF8(b []byte, charset string) string {
	switch strings.ToLower(charset) {
	case "iso-8859-1", "latin1", "us-ascii", "windows-1252":
		r := make([]rune, len(b))
		for i, c := range b {
			r[i] = rune(c)
		}
		return string(r)
	}
	return message.DecodeUTF8(b)
}

var (
	htmlBreak = regexp.MustCompile(`(?i)<br\s*/?>|</p>|</div>|</h[1-6]>|</li>|</tr>`)
	htmlTag   = regexp.MustCompile(`<[^>]*>`)
)

// htmlToText is the text an html-only message gets: tags dropped, breaks
// kept, entities decoded. mailparser uses html-to-text, whose layout
// (wrapping, link and list formatting) this does not copy.
func htmlToText(h string) string {
	s := htmlBreak.ReplaceAllString(h, "\n")
	s = htmlTag.ReplaceAllString(s, "")
	r := strings.NewReplacer("&nbsp;", " ", "&lt;", "<", "&gt;", ">", "&quot;", `"`, "&#39;", "'", "&amp;", "&")
	return r.Replace(s)
}
