package behavior_test

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/riftgate/riftgate/gateway/behavior"
	"github.com/riftgate/riftgate/gateway/message"
)

// The engine compiles a stub response's behaviors once, then for each
// request hands them the `is` fields: a JSON object body already rendered
// as mb renders it (4-space JSON), flagged with JSONBody.
func Example() {
	b, err := behavior.Compile(json.RawMessage(`{
		"is": {"body": {"id": "${ID}"}},
		"behaviors": [{"copy": {"from": "path", "into": "${ID}", "using": {"method": "regex", "selector": "\\d+"}}}]
	}`), behavior.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	resp := &behavior.Response{
		Response: &message.Response{StatusCode: 200, Body: []byte("{\n    \"id\": \"${ID}\"\n}")},
		JSONBody: true,
	}
	if err := b.Apply(context.Background(), &message.Request{Method: "GET", Path: "/orders/42"}, resp); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(string(resp.Body))
	// Output:
	// {
	//     "id": "42"
	// }
}
