package cli

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadConfigFile(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		noParse bool
		want    string
		wantErr string
	}{
		{name: "imposters wrapper kept byte for byte", files: map[string]string{"c.json": ` {"imposters": [{"port": 1, "b": 1.50}]} `},
			want: `{"imposters":[{"port": 1, "b": 1.50}]}`},
		{name: "a single imposter gets the wrapper", files: map[string]string{"c.json": `{"port": 1, "protocol": "http"}`},
			want: `{"imposters":[{"port": 1, "protocol": "http"}]}`},
		{name: "falsy imposters means a single imposter", files: map[string]string{"c.json": `{"imposters": null, "port": 2}`},
			want: `{"imposters":[{"imposters": null, "port": 2}]}`},
		{name: "a byte order mark is dropped", files: map[string]string{"c.json": "\uFEFF{\"imposters\": []}"},
			want: `{"imposters":[]}`},
		{name: "templated", files: map[string]string{"c.json": `{"imposters": [<%- include('i.json') %>]}`, "i.json": `{"port": 3}`},
			want: `{"imposters":[{"port": 3}]}`},
		{name: "noParse leaves tags alone", noParse: true, files: map[string]string{"c.json": `{"imposters": [{"port": 4, "name": "<%- x %>"}]}`},
			want: `{"imposters":[{"port": 4, "name": "<%- x %>"}]}`},
		{name: "noParse still needs JSON", noParse: true, files: map[string]string{"c.json": `{"imposters": [<%- include('i.json') %>]}`},
			wantErr: "unable to parse configfile"},
		{name: "not JSON after rendering", files: map[string]string{"c.json": `{"imposters": [<%- 1 %>,]}`},
			wantErr: "unable to parse configfile"},
		{name: "template error", files: map[string]string{"c.json": `<%- include('gone.json') %>`},
			wantErr: "Could not find the include file"},
		{name: "null", files: map[string]string{"c.json": `null`}, wantErr: "null"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, tc.files)
			got, err := LoadConfigFile(context.Background(), filepath.Join(dir, "c.json"), tc.noParse)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
	if _, err := LoadConfigFile(context.Background(), filepath.Join(t.TempDir(), "none.json"), false); err == nil || !os.IsNotExist(unwrapAll(err)) {
		t.Fatalf("missing configfile: %v", err)
	}
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok || u.Unwrap() == nil {
			return err
		}
		err = u.Unwrap()
	}
}
