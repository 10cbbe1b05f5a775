// Command cart-go is a riftgate plugin that keeps a shopping cart in the
// request's flow: POST adds the request body as an item, GET lists the
// items, DELETE empties the cart.
//
// The cart is stored as a JSON array under one flow key, so an inject
// script sees it as an array in state[key]. Adding is a read-modify-write
// guarded by flow_cas, so concurrent POSTs to one flow lose no item.
package main

import (
	"encoding/json"
	"errors"

	rift "github.com/riftgate/riftgate/sdk/go"
)

const maxTries = 64

type config struct {
	Key string `json:"key"`
}

func main() {}

func init() { rift.Handle(cart) }

func cart(req *rift.Request) *rift.Response {
	cfg := config{Key: "cart"}
	if err := json.Unmarshal(rift.Config(), &cfg); err != nil || cfg.Key == "" {
		return reply(500, "text/plain", "cart-go: config must be {\"key\": \"<flow key>\"}")
	}
	switch req.Method() {
	case "GET":
		items, _, err := rift.FlowGet(cfg.Key)
		if errors.Is(err, rift.ErrNotFound) {
			items = []byte("[]")
		} else if err != nil {
			return giveUp(err)
		}
		return list(200, items)
	case "POST":
		return add(cfg.Key, item(req.Body()))
	case "DELETE":
		if err := rift.FlowDelete(cfg.Key); err != nil && !errors.Is(err, rift.ErrNotFound) {
			return giveUp(err)
		}
		return list(200, []byte("[]"))
	}
	return reply(405, "text/plain", "cart-go: use GET, POST or DELETE")
}

// item turns a request body into one JSON value: valid JSON is kept as it
// is, anything else becomes a JSON string.
func item(body []byte) []byte {
	if len(body) > 0 && json.Valid(body) {
		return body
	}
	b, _ := json.Marshal(string(body)) // a string always marshals
	return b
}

func add(key string, it []byte) *rift.Response {
	for range maxTries {
		old, ver, err := rift.FlowGet(key)
		var items []byte
		switch {
		case errors.Is(err, rift.ErrNotFound):
			ver = 0
			items = append(append([]byte{'['}, it...), ']')
		case err != nil:
			return giveUp(err)
		case len(old) < 2 || old[len(old)-1] != ']':
			return reply(500, "text/plain", "cart-go: stored cart is not a JSON array")
		case len(old) == 2: // "[]"
			items = append(append([]byte{'['}, it...), ']')
		default:
			items = append(append(append(old[:len(old)-1:len(old)-1], ','), it...), ']')
		}
		err = rift.FlowCAS(key, ver, items)
		switch {
		case errors.Is(err, rift.ErrCASMismatch):
			continue
		case errors.Is(err, rift.ErrTooLarge):
			return reply(413, "text/plain", "cart-go: the cart is full")
		case err != nil:
			return giveUp(err)
		}
		return list(201, items)
	}
	return reply(503, "text/plain", "cart-go: too much contention on the cart")
}

func list(status int, items []byte) *rift.Response {
	body := append(append([]byte(`{"items":`), items...), '}')
	return &rift.Response{Status: status, Headers: []rift.Header{{Name: "Content-Type", Value: "application/json"}}, Body: body}
}

// giveUp writes no response: the host answers 503 when the flow's owner is
// unreachable and 500 otherwise.
func giveUp(err error) *rift.Response {
	rift.Log(rift.LevelWarn, "cart-go: "+err.Error())
	return nil
}

func reply(status int, ctype, msg string) *rift.Response {
	return &rift.Response{Status: status, Headers: []rift.Header{{Name: "Content-Type", Value: ctype}}, Body: []byte(msg)}
}
