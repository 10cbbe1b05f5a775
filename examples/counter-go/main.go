// Command counter-go is a riftgate plugin that counts requests per flow.
//
// Each call reads the counter, adds one and writes it back with flow_cas;
// when another request wrote in between, the CAS fails and the call reads
// again. The count is stored as JSON text, so an inject script sees it as
// a number in state[key].
//
// The module also exports a predicate, matches, that accepts only requests
// carrying an X-Flow-Id header, so an imposter can send the others to a
// stub that explains what is missing, and a decorate behavior that stamps
// any response with the scoped flow id it ran under (X-Rift-Flow), which
// shows which flow a request landed in.
package main

import (
	"encoding/json"
	"errors"
	"strconv"

	rift "github.com/riftgate/riftgate/sdk/go"
)

// maxTries bounds the CAS loop: under heavy contention on one flow the call
// gives up with 503 rather than spin past its deadline.
const maxTries = 64

type config struct {
	Key string `json:"key"`
}

func main() {}

func init() {
	rift.Handle(count)
	rift.Match(func(req *rift.Request) bool { return req.Header("X-Flow-Id") != "" })
	rift.Decorate(func(req *rift.Request, resp *rift.Response) *rift.Response {
		resp.SetHeader("X-Rift-Flow", req.Flow())
		return resp
	})
}

func count(req *rift.Request) *rift.Response {
	cfg := config{Key: "count"}
	if err := json.Unmarshal(rift.Config(), &cfg); err != nil || cfg.Key == "" {
		return text(500, "counter-go: config must be {\"key\": \"<flow key>\"}")
	}
	for range maxTries {
		old, ver, err := rift.FlowGet(cfg.Key)
		n := int64(0)
		switch {
		case errors.Is(err, rift.ErrNotFound):
			ver = 0 // CAS with 0 means "only if still absent"
		case err != nil:
			return unavailable(err)
		default:
			if n, err = strconv.ParseInt(string(old), 10, 64); err != nil {
				return text(500, "counter-go: stored value is not an integer")
			}
		}
		n++
		err = rift.FlowCAS(cfg.Key, ver, strconv.AppendInt(nil, n, 10))
		if errors.Is(err, rift.ErrCASMismatch) {
			continue
		}
		if err != nil {
			return unavailable(err)
		}
		body := strconv.AppendInt([]byte(`{"count":`), n, 10)
		return &rift.Response{
			Headers: []rift.Header{{Name: "Content-Type", Value: "application/json"}},
			Body:    append(body, '}'),
		}
	}
	return text(503, "counter-go: too much contention on the counter")
}

// unavailable gives up on a flow error: returning nil lets the host answer
// 503 for an unreachable owner and 500 for anything else.
func unavailable(err error) *rift.Response {
	rift.Log(rift.LevelWarn, "counter-go: "+err.Error())
	return nil
}

func text(status int, msg string) *rift.Response {
	return &rift.Response{Status: status, Headers: []rift.Header{{Name: "Content-Type", Value: "text/plain"}}, Body: []byte(msg)}
}
