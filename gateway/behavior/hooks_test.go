package behavior

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/message"
)

// setHeader is a decorator written for these tests: the engine's goja and
// plugin decorators plug in the same way.
type setHeader struct{ name, value string }

func (s setHeader) Decorate(_ context.Context, _ *message.Request, resp *Response) error {
	resp.SetHeader(s.name, s.value)
	return nil
}

type failing struct{}

func (failing) Decorate(context.Context, *message.Request, *Response) error {
	return errors.New("decorator failed")
}

type fixedWait int

func (w fixedWait) WaitMillis(context.Context, *message.Request) (int, error) { return int(w), nil }

func TestHooks(t *testing.T) {
	var gotSrc, gotCmd string
	var gotSpec json.RawMessage
	opts := Options{
		Inject: InjectHooks{
			Decorate: func(src string) (Decorator, error) {
				gotSrc = src
				return setHeader{"X-Decorated", "${T}"}, nil
			},
			ShellTransform: func(cmd string) (Decorator, error) {
				gotCmd = cmd
				return setHeader{"X-Shell", "yes"}, nil
			},
			Wait: func(string) (Waiter, error) { return fixedWait(15), nil },
		},
		Wasm: func(spec json.RawMessage) (Decorator, error) {
			gotSpec = spec
			return setHeader{"X-Wasm", "yes"}, nil
		},
	}
	// decorate runs before copy here, so copy replaces the token the
	// decorator wrote: behaviors run in array order.
	b, err := Compile(json.RawMessage(`{"is":{},"behaviors":[
		{"decorate":"function (config) {}"},
		{"copy":{"from":"method","into":"${T}","using":{"method":"regex","selector":".+"}}},
		{"shellTransform":"transform.sh"},
		{"wait":"function () { return 15; }"},
		{"wait":"10"},
		{"decorate":{"wasm":{"module":"m","config":{"a":1}}}}]}`), opts)
	if err != nil {
		t.Fatal(err)
	}
	resp := &Response{Response: &message.Response{}}
	d, err := b.ApplyDeferred(context.Background(), &message.Request{Method: "PATCH"}, resp)
	if err != nil {
		t.Fatal(err)
	}
	if d != 25*time.Millisecond {
		t.Errorf("total wait %v, want 25ms", d)
	}
	if gotSrc != "function (config) {}" || gotCmd != "transform.sh" || string(gotSpec) != `{"module":"m","config":{"a":1}}` {
		t.Errorf("hooks got %q, %q, %s", gotSrc, gotCmd, gotSpec)
	}
	for name, want := range map[string]string{"X-Decorated": "PATCH", "X-Shell": "yes", "X-Wasm": "yes"} {
		if v, _ := resp.Header(name); v != want {
			t.Errorf("%s = %q, want %q", name, v, want)
		}
	}

	failed, err := Compile(json.RawMessage(`{"behaviors":[{"decorate":"x"}]}`), Options{Inject: InjectHooks{
		Decorate: func(string) (Decorator, error) { return failing{}, nil },
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := failed.Apply(context.Background(), &message.Request{}, &Response{Response: &message.Response{}}); err == nil || !strings.Contains(err.Error(), "decorator failed") {
		t.Fatalf("decorator error: %v", err)
	}

	if _, err := Compile(json.RawMessage(`{"behaviors":[{"decorate":{"wasm":{}}}]}`), Options{}); err == nil || !strings.Contains(err.Error(), "bad data: wasm decorators need") {
		t.Fatalf("wasm without a host: %v", err)
	}
}

// The CSV is read when a request needs it, as mb reads it: a file that is
// missing leaves the tokens, and one written or changed later answers.
func TestLookupReadsTheCSVPerRequest(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.csv")
	b, err := Compile(json.RawMessage(`{"is":{"body":"${r}[b]"},"behaviors":[{"lookup":{"key":{"from":"path","using":{"method":"regex","selector":"\\w+"}},"fromDataSource":{"csv":{"path":`+strconv.Quote(path)+`,"keyColumn":"a"}},"into":"${r}"}}]}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Warnings()) != 0 {
		t.Fatalf("warnings %v", b.Warnings())
	}
	answer := func() string {
		resp := &Response{Response: &message.Response{Body: []byte("${r}[b]")}}
		if err := b.Apply(context.Background(), &message.Request{Path: "/k"}, resp); err != nil {
			t.Fatal(err)
		}
		return string(resp.Body)
	}
	if got := answer(); got != "${r}[b]" {
		t.Fatalf("no file: %q", got)
	}
	for _, want := range []string{"one", "second value"} {
		if err := os.WriteFile(path, []byte("a,b\nk,"+want+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := answer(); got != want {
			t.Fatalf("after writing %q: %q", want, got)
		}
	}
}

func TestNilBehaviors(t *testing.T) {
	var b *Behaviors
	if !b.Empty() || b.Warnings() != nil {
		t.Fatal("nil behaviors")
	}
	if err := b.Apply(context.Background(), &message.Request{}, &Response{Response: &message.Response{}}); err != nil {
		t.Fatal(err)
	}
}
