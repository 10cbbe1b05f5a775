package nodehost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// Command is name with args as a child in its own process group: when ctx
// ends, or riftgate dies, the whole group is killed (a module's own
// children included), and Wait gives up on pipes a grandchild holds after
// a short grace.
func Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error {
		err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		}
		return err
	}
	cmd.WaitDelay = 2 * time.Second
	return cmd
}

// exitGrace is how long a module's process may go on after it answered
// (async work it did not await, as mb's process would finish) before its
// group is killed.
const exitGrace = 2 * time.Second

// Call runs script (JavaScript, as node -e) with args. in is its stdin;
// the script writes one JSON answer, {"result": ...} or {"error": "..."},
// to file descriptor 3, leaving stdout and stderr to the module (both
// copied to logw). It answers the result, or the module's error.
func Call(ctx context.Context, script string, args []string, in []byte, logw io.Writer) (json.RawMessage, error) {
	node, err := Path()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	full := append([]string{"--max-old-space-size=" + strconv.Itoa(HeapLimitMB), "-e", script}, args...)
	cmd := Command(ctx, node, full...)
	cmd.Stdin = bytes.NewReader(in)
	cmd.Stdout, cmd.Stderr = logw, logw
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("answer pipe: %w", err)
	}
	defer r.Close()
	cmd.ExtraFiles = []*os.File{w}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, fmt.Errorf("start node: %w", err)
	}
	w.Close()
	// The answer ends when the script closes fd 3 or the process ends;
	// a module that answers nothing ends with ctx.
	answer, readErr := io.ReadAll(io.LimitReader(r, maxAnswer))
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var waitErr error
	select {
	case waitErr = <-exited:
	case <-time.After(exitGrace):
		cancel()
		waitErr = <-exited
	case <-ctx.Done():
		waitErr = <-exited
	}
	var a struct {
		Result json.RawMessage `json:"result"`
		Error  *string         `json:"error"`
	}
	if readErr != nil || len(answer) == 0 || json.Unmarshal(answer, &a) != nil {
		if cerr := context.Cause(ctx); cerr != nil && ctx.Err() != nil {
			return nil, fmt.Errorf("node ended before answering: %w", cerr)
		}
		return nil, fmt.Errorf("node ended before answering: %v", waitErr)
	}
	if a.Error != nil {
		return nil, errors.New(*a.Error)
	}
	if len(a.Result) == 0 {
		return json.RawMessage("null"), nil
	}
	return a.Result, nil
}

// maxAnswer caps what a module may answer (a formatter's imposters).
const maxAnswer = 256 << 20
