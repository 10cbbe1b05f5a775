package inject

import (
	"reflect"
	"testing"

	"github.com/riftgate/riftgate/gateway/behavior"
)

// FuzzApply checks the reader of decorated and shell-transformed
// responses: any input is an error or a response, and a response read back
// from its own rendering is the same response.
func FuzzApply(f *testing.F) {
	for _, seed := range []string{
		`{"statusCode": 201, "headers": {"A": "1", "B": ["2", "3"]}, "body": "text"}`,
		`{"statusCode": "${code}", "body": {"a": [1, {"b": null}]}}`,
		`{"body": "AAEC", "_mode": "binary"}`,
		`{"body": 5}`, `{"headers": null, "body": null}`, `{}`, `[]`, `"x"`, `{"statusCode": true}`,
		`{"headers": {"a": 1, "a": [true]}}`, `{"body": "not base64", "_mode": "binary"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		var r behavior.Response
		if err := apply(text, &r, goIndent); err != nil {
			return
		}
		var again behavior.Response
		if err := apply([]byte(responseText(&r)), &again, goIndent); err != nil {
			t.Fatalf("%s: rendering %s does not read back: %v", text, responseText(&r), err)
		}
		if !reflect.DeepEqual(normal(r), normal(again)) {
			t.Fatalf("%s:\n first %+v %+v\nsecond %+v %+v", text, r, *r.Response, again, *again.Response)
		}
	})
}

// normal drops the difference between an empty and a nil body or header
// list, which a rendering cannot keep.
func normal(r behavior.Response) behavior.Response {
	c := *r.Response
	if len(c.Body) == 0 {
		c.Body = nil
	}
	if len(c.Headers) == 0 {
		c.Headers = nil
	}
	r.Response = &c
	return r
}
