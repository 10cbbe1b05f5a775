package cli_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

// base64FormatterJS is a formatter of the kind mb's CLI suite runs: the
// configuration saved as base64, through fs-extra (an npm package, which
// the embedded runtime cannot load), its load and save asynchronous.
const base64FormatterJS = `'use strict';
const fsx = require('fs-extra');
module.exports = {
	load: async options => JSON.parse(Buffer.from(await fsx.readFile(options.configfile, 'utf8'), 'base64').toString('utf8')),
	save: (options, imposters) => new Promise((resolve, reject) => {
		if (options.customName) { imposters.imposters.forEach(i => { i.name = options.customName; }); }
		fsx.writeFile(options.savefile, Buffer.from(JSON.stringify(imposters)).toString('base64'), err => err ? reject(err) : resolve());
	})
};
`

// nodeModulesDir is build/node's node_modules, where mb and its packages
// (fs-extra, mountebank-formatters, ejs) are installed.
func nodeModulesDir(t *testing.T) string {
	t.Helper()
	root, err := gatewaytest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	d := filepath.Join(root, "build", "node", "node_modules")
	if _, err := os.Stat(filepath.Join(d, "fs-extra")); err != nil {
		t.Fatalf("build/node lacks fs-extra: run `make node`: %v", err)
	}
	return d
}

// formatterDir is a user's project folder: the formatter beside a
// node_modules that has its packages.
func formatterDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Symlink(nodeModulesDir(t), filepath.Join(dir, "node_modules")); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestNodeFormatterAsMountebank: mb's formatter round trip (save through the
// formatter, then start from what it wrote) with a formatter that requires
// an npm package, and a custom option handed to it, on mb and riftgate.
func TestNodeFormatterAsMountebank(t *testing.T) {
	got := map[string]string{}
	for name, bin := range map[string]string{"mb": mbBinary(t), "riftgate": gatewaytest.Binary(t)} {
		dir := formatterDir(t, map[string]string{"b64.js": base64FormatterJS})
		fmtPath := filepath.Join(dir, "b64.js")
		port, imp := gatewaytest.FreePort(t), gatewaytest.FreePort(t)
		p := startProc(t, dir, bin, "start", "--port", strconv.Itoa(port), "--host", "127.0.0.1", "--nologfile", "--pidfile", "a.pid")
		waitForFile(t, p, filepath.Join(dir, "a.pid"))
		imposter := fmt.Sprintf(`{"protocol":"http","port":%d,"recordRequests":false,"stubs":[{"responses":[{"is":{"body":"SUCCESS"}}]}]}`, imp)
		if code, body := gatewaytest.Do(t, http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/imposters", port), imposter, nil); code != http.StatusCreated {
			t.Fatalf("%s POST: %d %s", name, code, body)
		}
		if _, stderr, code := run(t, bin, dir, "save", "--port", strconv.Itoa(port), "--formatter", fmtPath); code != 0 {
			t.Fatalf("%s save: exit %d: %s", name, code, stderr)
		}
		if _, stderr, code := run(t, bin, dir, "save", "--port", strconv.Itoa(port), "--formatter", fmtPath, "--savefile", "named.b64", "--customName", "custom name"); code != 0 {
			t.Fatalf("%s save --customName: exit %d: %s", name, code, stderr)
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		p.exitCode(t)
		for _, f := range []string{"mb.json", "named.b64"} {
			b, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			plain, err := base64.StdEncoding.DecodeString(string(b))
			if err != nil {
				t.Fatalf("%s %s is not base64: %v", name, f, err)
			}
			var v any
			if err := json.Unmarshal(plain, &v); err != nil {
				t.Fatalf("%s %s: %v", name, f, err)
			}
			canon, _ := json.Marshal(v)
			got[name] += f + ": " + strings.ReplaceAll(string(canon), strconv.Itoa(imp), "PORT") + "\n"
		}
		// Start again from the saved file, through the formatter's load.
		p = startProc(t, dir, bin, "start", "--port", strconv.Itoa(port), "--host", "127.0.0.1", "--nologfile", "--pidfile", "b.pid",
			"--configfile", "mb.json", "--formatter", fmtPath)
		waitForFile(t, p, filepath.Join(dir, "b.pid"))
		var code int
		var body []byte
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if code, body = gatewaytest.Do(t, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/", imp), nil, nil); code == 200 {
				break
			}
		}
		if code != 200 || string(body) != "SUCCESS" {
			t.Fatalf("%s: the loaded imposter answered %d %q", name, code, body)
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		p.exitCode(t)
	}
	if got["mb"] != got["riftgate"] {
		t.Fatalf("saved files differ:\nmb:       %s\nriftgate: %s", got["mb"], got["riftgate"])
	}
	if !strings.Contains(got["riftgate"], `"name":"custom name"`) {
		t.Fatalf("the custom option did not reach the formatter: %s", got["riftgate"])
	}
}

// TestPublishedFormatterPackage runs mountebank-formatters itself, the npm
// package with its own dependency (ejs), named by its path as a user's
// formatter, on a template that includes another file.
func TestPublishedFormatterPackage(t *testing.T) {
	mods := nodeModulesDir(t)
	for name, bin := range map[string]string{"mb": mbBinary(t), "riftgate": gatewaytest.Binary(t)} {
		port, imp := gatewaytest.FreePort(t), gatewaytest.FreePort(t)
		dir := formatterDir(t, map[string]string{
			"imposters.ejs": fmt.Sprintf(`{"imposters":[{"protocol":"http","port":%d,"stubs":[<%% include stub.ejs %%>]}]}`, imp),
			"stub.ejs":      `{"responses":[{"is":{"statusCode":201,"body":"<%= 'from ' + 'ejs' %>"}}]}`,
		})
		p := startProc(t, dir, bin, "start", "--port", strconv.Itoa(port), "--host", "127.0.0.1", "--nologfile", "--pidfile", "a.pid",
			"--configfile", "imposters.ejs", "--formatter", filepath.Join(mods, "mountebank-formatters"))
		waitForFile(t, p, filepath.Join(dir, "a.pid"))
		var code int
		var body []byte
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if code, body = gatewaytest.Do(t, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/", imp), nil, nil); code == 201 {
				break
			}
		}
		if code != 201 || string(body) != "from ejs" {
			t.Fatalf("%s: answered %d %q", name, code, body)
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		p.exitCode(t)
	}
}

// TestFormatterFailures: what a formatter without node, or a hostile one,
// costs is the one command, with a message that says why.
func TestFormatterFailures(t *testing.T) {
	bin := gatewaytest.Binary(t)
	noNode := t.TempDir() // a PATH with no node on it
	for _, tc := range []struct {
		name, formatter string
		env             []string
		want            string
	}{
		{"node missing, a formatter needing npm packages", base64FormatterJS, []string{"PATH=" + noNode}, "node is not installed"},
		{"node missing at RIFTGATE_NODE", base64FormatterJS, []string{"RIFTGATE_NODE=" + filepath.Join(noNode, "node")}, "node is not installed"},
		{"exits without answering", `module.exports = { load: () => process.exit(0) };`, nil, "node ended before answering"},
		{"throws", `module.exports = { load: () => { throw new Error('no such config'); } };`, nil, "no such config"},
		{"rejects", `module.exports = { load: () => Promise.reject(new Error('async no')) };`, nil, "async no"},
		{"no load", `module.exports = {};`, nil, "formatter.load is not a function"},
		{"not a module", `module.exports = {`, nil, "SyntaxError"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := formatterDir(t, map[string]string{"f.js": tc.formatter, "conf": "e30="})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "start", "--port", strconv.Itoa(gatewaytest.FreePort(t)), "--nologfile",
				"--pidfile", "f.pid", "--configfile", "conf", "--formatter", filepath.Join(dir, "f.js"))
			cmd.Dir, cmd.Env = dir, append(os.Environ(), tc.env...)
			out, err := cmd.CombinedOutput()
			if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 1 {
				t.Fatalf("want exit 1, got %v:\n%s", err, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Fatalf("want %q in:\n%s", tc.want, out)
			}
			if fileExists(filepath.Join(dir, "f.pid")) {
				t.Fatal("a server started")
			}
		})
	}
}
