package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/riftgate/riftgate/examples/demo"
	"github.com/riftgate/riftgate/gateway"
)

func TestEngineOptions(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"c.json": `{"port": 5}`})
	tests := []struct {
		name    string
		args    []string
		want    gateway.Options
		wantErr string
	}{
		{name: "defaults", want: gateway.Options{Port: 2525, MaxFlows: 100000, FlowBudget: 2 * time.Second, RecordedMemory: 32 << 20}},
		{name: "everything", args: []string{"--port", "3000", "--host", "0.0.0.0", "--datadir", "d", "--allowInjection",
			"--localOnly", "--ipWhitelist", "127.0.0.1|10.0.0.1", "--origin", "http://x", "--apikey", "k", "--mock", "--debug", "--maxFlows", "7", "--flowBudget", "750",
			"--maxRecordedRequests", "1000000", "--recordedRequestsMemory", "8"},
			want: gateway.Options{Port: 3000, Host: "0.0.0.0", DataDir: "d", AllowInjection: true, LocalOnly: true,
				IPWhitelist: []string{"127.0.0.1", "10.0.0.1"}, Origin: "http://x", APIKey: "k", Mock: true, Debug: true, MaxFlows: 7, FlowBudget: 750 * time.Millisecond,
				MaxRecorded: 1000000, RecordedMemory: 8 << 20}},
		{name: "no budget", args: []string{"--flowBudget", "0"}, wantErr: "--flowBudget 0"},
		{name: "whitelist star allows all", args: []string{"--ipWhitelist", "*"}, want: gateway.Options{Port: 2525, MaxFlows: 100000, FlowBudget: 2 * time.Second, RecordedMemory: 32 << 20}},
		{name: "demo", args: []string{"--demo"}, want: gateway.Options{Port: 2525, MaxFlows: 100000, FlowBudget: 2 * time.Second, RecordedMemory: 32 << 20, Imposters: demo.Imposters}},
		{name: "configfile", args: []string{"--configfile", filepath.Join(dir, "c.json")},
			want: gateway.Options{Port: 2525, MaxFlows: 100000, FlowBudget: 2 * time.Second, RecordedMemory: 32 << 20, Imposters: []byte(`{"imposters":[{"port": 5}]}`)}},
		{name: "demo and configfile", args: []string{"--demo", "--configfile", "c.json"}, wantErr: "cannot be combined"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := parseArgs(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			got, err := engineOptions(context.Background(), s)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Imposters, tc.want.Imposters) {
				t.Fatalf("imposters = %s, want %s", got.Imposters, tc.want.Imposters)
			}
			got.Imposters, tc.want.Imposters = nil, nil
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// The bundled demo is a valid configfile: the wrapper and two imposters.
func TestDemoImpostersParse(t *testing.T) {
	wrapped, err := wrapImposters(demo.Imposters)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(bytes.TrimSpace(demo.Imposters), []byte(`{`)) || !bytes.Contains(wrapped, []byte(`"port": 4545`)) || !bytes.Contains(wrapped, []byte(`"port": 4546`)) {
		t.Fatalf("demo imposters: %s", wrapped)
	}
}
