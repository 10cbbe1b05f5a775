package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestClusterOptions(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("0123456789abcdef-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"--datadir", dir, "--cluster-node-name", "n2", "--cluster-listen", "127.0.0.2:7070", "--cluster-secret-file", secret}
	for _, tc := range []struct {
		name    string
		args    []string
		env     string
		want    func(t *testing.T, ok bool, advertise string, join []string, secret string)
		wantErr string
	}{
		{name: "a single node", args: nil, want: func(t *testing.T, ok bool, _ string, _ []string, _ string) {
			if ok {
				t.Error("cluster mode without cluster flags")
			}
		}},
		{name: "the issue's join", args: append(base, "--cluster-join", "http://127.0.0.1:7070, http://127.0.0.3:7070"),
			want: func(t *testing.T, ok bool, adv string, join []string, sec string) {
				if !ok || adv != "http://127.0.0.2:7070" || strings.Join(join, " ") != "http://127.0.0.1:7070 http://127.0.0.3:7070" || sec != "0123456789abcdef-secret" {
					t.Errorf("ok %v advertise %q join %q secret %q", ok, adv, join, sec)
				}
			}},
		{name: "advertise given", args: append(base, "--cluster-bootstrap", "--cluster-advertise", "http://gw-2.internal:7070/"),
			want: func(t *testing.T, ok bool, adv string, _ []string, _ string) {
				if adv != "http://gw-2.internal:7070" {
					t.Errorf("advertise %q", adv)
				}
			}},
		{name: "the secret from the environment", args: []string{"--datadir", dir, "--cluster-node-name", "n1", "--cluster-listen", "127.0.0.1:7070", "--cluster-bootstrap"},
			env: "env-secret-of-16-bytes", want: func(t *testing.T, _ bool, _ string, _ []string, sec string) {
				if sec != "env-secret-of-16-bytes" {
					t.Errorf("secret %q", sec)
				}
			}},
		{name: "no datadir", args: []string{"--cluster-node-name", "n1", "--cluster-listen", "127.0.0.1:7070", "--cluster-secret-file", secret, "--cluster-bootstrap"}, wantErr: "--datadir is required"},
		{name: "bootstrap and join", args: append(base, "--cluster-bootstrap", "--cluster-join", "http://x:1"), wantErr: "give one of them"},
		{name: "neither", args: base, wantErr: "--cluster-bootstrap (the first node) or --cluster-join"},
		{name: "no secret", args: []string{"--datadir", dir, "--cluster-node-name", "n1", "--cluster-listen", "127.0.0.1:7070", "--cluster-bootstrap"}, wantErr: "at least 16 bytes"},
		{name: "a flag without a name", args: []string{"--cluster-join", "http://x:1"}, wantErr: "--cluster-join needs --cluster-node-name"},
		{name: "an unreachable listen address", args: []string{"--datadir", dir, "--cluster-node-name", "n1", "--cluster-listen", "0.0.0.0:7070", "--cluster-secret-file", secret, "--cluster-bootstrap"}, wantErr: "give --cluster-advertise"},
		{name: "a join that is no URL", args: append(base, "--cluster-join", "127.0.0.1:7070"), wantErr: "is not a peer URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(secretEnv, tc.env)
			s, err := parseArgs(append([]string{"start"}, tc.args...))
			if err != nil {
				t.Fatal(err)
			}
			opts, ok, err := clusterOptions(s)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.want(t, ok, opts.Advertise, opts.Join, string(opts.Secret))
		})
	}
}
