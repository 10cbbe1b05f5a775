package mberr

import (
	"encoding/json"
	"errors"
	"net/http"
	"testing"
)

func TestBodyShowsInvalidSourceAsText(t *testing.T) {
	b := Body(New(BadData, "m").WithSource(json.RawMessage("not json")))
	want := `{"errors":[{"code":"bad data","message":"m","source":"not json"}]}`
	if string(b) != want {
		t.Fatalf("Body = %s, want %s", b, want)
	}
}

func TestStatusesFollowMountebank(t *testing.T) {
	for code, status := range map[string]int{
		BadData: 400, ResourceConflict: 400, NoSuchResource: 404, Unauthorized: 401,
		InsufficientAccess: 403, PayloadTooLarge: 413, PluginError: 500, FlowUnavailable: 503,
	} {
		if got := New(code, "").Status; got != status {
			t.Errorf("%s: status %d, want %d", code, got, status)
		}
	}
	if e := As(errors.New("x")); e.Status != http.StatusInternalServerError {
		t.Fatalf("a plain error maps to %d", e.Status)
	}
}

// Node's ERR_INVALID_URL, as mb passes it on from its dry run: the code,
// the input and the stub, no message.
func TestInvalidURLShape(t *testing.T) {
	got := string(Body(InvalidURL("[object Object]").WithSource(`{"responses":[]}`)))
	want := `{"errors":[{"code":"ERR_INVALID_URL","input":"[object Object]","source":"{\"responses\":[]}"}]}`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
