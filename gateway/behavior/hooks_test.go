package behavior

import (
	"context"
	"encoding/json"
	"errors"
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

func TestRepeat(t *testing.T) {
	for _, c := range []struct {
		response string
		want     int
	}{
		{`{"is":{}}`, 1},
		{`{"is":{},"repeat":3}`, 3},
		{`{"is":{},"repeat":"2"}`, 2},
		{`{"is":{},"repeat":2.5}`, 3},
		{`{"is":{},"_behaviors":{"repeat":4}}`, 4},
		// mb upcasts _behaviors only when there is no repeat of its own.
		{`{"is":{},"repeat":2,"_behaviors":{"repeat":4}}`, 2},
	} {
		b, err := Compile(json.RawMessage(c.response), Options{})
		if err != nil {
			t.Fatal(err)
		}
		if b.Repeat() != c.want {
			t.Errorf("%s: repeat %d, want %d", c.response, b.Repeat(), c.want)
		}
	}
}

func TestMissingCSV(t *testing.T) {
	b, err := Compile(json.RawMessage(`{"is":{"body":"${r}[a]"},"behaviors":[{"lookup":{"key":{"from":"path","using":{"method":"regex","selector":".+"}},"fromDataSource":{"csv":{"path":"/nonexistent/x.csv","keyColumn":"a"}},"into":"${r}"}}]}`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Warnings()) != 1 || !strings.Contains(b.Warnings()[0], "/nonexistent/x.csv") {
		t.Fatalf("warnings %v", b.Warnings())
	}
	resp := &Response{Response: &message.Response{Body: []byte("${r}[a]")}}
	if err := b.Apply(context.Background(), &message.Request{Path: "/a"}, resp); err != nil || string(resp.Body) != "${r}[a]" {
		t.Fatalf("%q, %v", resp.Body, err)
	}
}

func TestNilBehaviors(t *testing.T) {
	var b *Behaviors
	if b.Repeat() != 1 || !b.Empty() || b.Warnings() != nil {
		t.Fatal("nil behaviors")
	}
	if err := b.Apply(context.Background(), &message.Request{}, &Response{Response: &message.Response{}}); err != nil {
		t.Fatal(err)
	}
}
