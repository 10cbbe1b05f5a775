package predicate_test

import (
	"encoding/json"
	"fmt"

	"github.com/riftgate/riftgate/gateway/message"
	"github.com/riftgate/riftgate/gateway/predicate"
)

// The engine compiles a stub's predicates once, indexes the stub by its
// hint, and matches requests.
func Example() {
	p, err := predicate.CompileAll([]json.RawMessage{
		json.RawMessage(`{"equals": {"method": "POST", "path": "/Orders"}}`),
		json.RawMessage(`{"equals": {"body": {"customer": "bob"}}}`),
	}, predicate.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("index by %+v\n", predicate.PathKeys(p))
	r := &message.Request{Method: "POST", Path: "/orders", Body: []byte(`{"Customer": "Bob"}`)}
	fmt.Println(p.Match(r))
	// Output:
	// index by [{Text:/orders Prefix:false}]
	// true
}
