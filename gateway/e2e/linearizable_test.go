package e2e_test

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

// registerInput is one operation on a flow key: a put of value, or a get.
type registerInput struct {
	key   string
	put   bool
	value string
}

// registerModel is a key/value register per flow key, partitioned by key.
var registerModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(registerInput).key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return "" },
	Step: func(state, input, output any) (bool, any) {
		in := input.(registerInput)
		if in.put {
			return true, in.value
		}
		return output.(string) == state.(string), state
	},
	DescribeOperation: func(input, output any) string {
		in := input.(registerInput)
		if in.put {
			return fmt.Sprintf("put(%s, %s)", in.key, in.value)
		}
		return fmt.Sprintf("get(%s) -> %v", in.key, output)
	},
}

// TestFlowHistoryIsLinearizable drives one flow from 8 concurrent clients
// through the real binary and checks the history with porcupine.
func TestFlowHistoryIsLinearizable(t *testing.T) {
	rg := gatewaytest.Start(t)
	port := rg.PostImposter(`{"protocol":"http","_rift":{"flowState":{"durability":"async"}}}`)
	var mu sync.Mutex
	var history []porcupine.Operation
	start := time.Now()
	var wg sync.WaitGroup
	for c := 0; c < 8; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			rnd := rand.New(rand.NewSource(int64(c)))
			for i := 0; i < 40; i++ {
				in := registerInput{key: fmt.Sprintf("k%d", rnd.Intn(3)), put: rnd.Intn(2) == 0}
				path := fmt.Sprintf("/imposters/%d/flows/shared/%s", port, in.key)
				call := time.Since(start).Nanoseconds()
				var out any
				if in.put {
					in.value = fmt.Sprintf("c%d-%d", c, i)
					if status, _ := rg.Do("PUT", path, in.value); status != 200 {
						t.Errorf("put answered %d", status)
						return
					}
				} else {
					status, body := rg.Do("GET", path, nil)
					switch status {
					case 404:
						out = ""
					case 200:
						var v struct{ Value string }
						_ = json.Unmarshal(body, &v)
						out = v.Value
					default:
						t.Errorf("get answered %d", status)
						return
					}
				}
				ret := time.Since(start).Nanoseconds()
				mu.Lock()
				history = append(history, porcupine.Operation{ClientId: c, Input: in, Output: out, Call: call, Return: ret})
				mu.Unlock()
			}
		}(c)
	}
	wg.Wait()
	if res := porcupine.CheckOperations(registerModel, history); !res {
		t.Fatalf("the flow's history of %d operations is not linearizable", len(history))
	}
}
