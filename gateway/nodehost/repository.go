package nodehost

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"
)

//go:embed repository.js
var repositoryJS string

// RepoTimeout bounds one call into an imposters repository.
const RepoTimeout = 30 * time.Second

// Repository is an mb --impostersRepository module running in a node
// process of its own for as long as riftgate runs (repository.js), called
// one request at a time.
type Repository struct {
	cmd    *exec.Cmd
	cancel context.CancelFunc
	in     io.WriteCloser
	mu     sync.Mutex // one call at a time
	next   int
	answer chan repoAnswer
	exited chan struct{}
}

type repoAnswer struct {
	ID     int             `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *string         `json:"error"`
}

// OpenRepository starts module with mb's options object (create(config,
// logger)) and waits for it to be created.
func OpenRepository(module string, options map[string]any, logw io.Writer) (*Repository, error) {
	node, err := Path()
	if err != nil {
		return nil, err
	}
	opts, err := json.Marshal(options)
	if err != nil {
		return nil, fmt.Errorf("repository options: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := Command(ctx, node, "--max-old-space-size="+strconv.Itoa(HeapLimitMB), "-e", repositoryJS, module, string(opts))
	cmd.Stdout, cmd.Stderr = logw, logw
	in, err := cmd.StdinPipe()
	if err != nil {
		cancel()
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		cancel()
		return nil, err
	}
	cmd.ExtraFiles = []*os.File{w}
	if err := cmd.Start(); err != nil {
		cancel()
		r.Close()
		w.Close()
		return nil, fmt.Errorf("start node: %w", err)
	}
	w.Close()
	repo := &Repository{cmd: cmd, cancel: cancel, in: in, answer: make(chan repoAnswer, 16), exited: make(chan struct{})}
	go func() {
		defer r.Close()
		sc := bufio.NewScanner(r)
		sc.Buffer(nil, maxAnswer)
		for sc.Scan() {
			var a repoAnswer
			if json.Unmarshal(sc.Bytes(), &a) == nil {
				repo.answer <- a
			}
		}
		close(repo.answer)
	}()
	go func() { _ = cmd.Wait(); close(repo.exited) }()
	if _, err := repo.wait(context.Background(), 0); err != nil {
		repo.Close()
		return nil, fmt.Errorf("imposters repository %s: %w", module, err)
	}
	return repo, nil
}

// wait reads answers until the one to id (earlier ones answered calls that
// timed out).
func (r *Repository) wait(ctx context.Context, id int) (json.RawMessage, error) {
	timer := time.NewTimer(RepoTimeout)
	defer timer.Stop()
	for {
		select {
		case a, ok := <-r.answer:
			if !ok {
				return nil, errors.New("the repository's node process ended")
			}
			if a.ID != id {
				continue
			}
			if a.Error != nil {
				return nil, errors.New(*a.Error)
			}
			return a.Result, nil
		case <-timer.C:
			return nil, fmt.Errorf("no answer in %v", RepoTimeout)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// call sends one request and waits for its answer.
func (r *Repository) call(ctx context.Context, req map[string]any) (json.RawMessage, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next++
	req["id"] = r.next
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if _, err := r.in.Write(append(b, '\n')); err != nil {
		return nil, fmt.Errorf("the repository's node process: %w", err)
	}
	return r.wait(ctx, r.next)
}

// LoadAll is the repository's loadAll: the imposters it holds, to start.
func (r *Repository) LoadAll(ctx context.Context) ([]json.RawMessage, error) {
	out, err := r.call(ctx, map[string]any{"op": "loadAll"})
	if err != nil {
		return nil, err
	}
	var list []json.RawMessage
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, fmt.Errorf("loadAll: %w", err)
	}
	return list, nil
}

// All is the repository's all(): each imposter's definition.
func (r *Repository) All(ctx context.Context) ([]json.RawMessage, error) {
	out, err := r.call(ctx, map[string]any{"op": "all"})
	if err != nil {
		return nil, err
	}
	var list []json.RawMessage
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, fmt.Errorf("all: %w", err)
	}
	return list, nil
}

// Add is the repository's add(imposter), the imposter given as its JSON.
func (r *Repository) Add(ctx context.Context, imposter json.RawMessage) error {
	_, err := r.call(ctx, map[string]any{"op": "add", "imposter": imposter})
	return err
}

// Delete is the repository's del(port).
func (r *Repository) Delete(ctx context.Context, port int) error {
	_, err := r.call(ctx, map[string]any{"op": "del", "port": port})
	return err
}

// Close ends the process: its stdin closes, it finishes what it has, and
// after a grace its group is killed.
func (r *Repository) Close() {
	r.in.Close()
	select {
	case <-r.exited:
	case <-time.After(5 * time.Second):
	}
	r.cancel()
	<-r.exited
	for range r.answer { // the reader ends with the pipe
	}
}
