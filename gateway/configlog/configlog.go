// Package configlog is the configuration log of a single node: every
// command is applied, made durable in one bbolt file (config.db under
// --datadir) and only then made visible, so an acknowledged change survives
// kill -9 and a failed one leaves nothing behind.
//
// The file holds a snapshot of the state and the commands applied since,
// each command in its wire form (config.EncodeCommand). Opening it loads the
// snapshot and replays the commands; every CompactEvery commands the state
// is written as the new snapshot and the commands it covers are deleted, in
// the same transaction as the command that triggers it.
package configlog

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/riftgate/riftgate/gateway/config"
	"github.com/riftgate/riftgate/gateway/mberr"
	bolt "go.etcd.io/bbolt"
)

// MaxCommandBytes caps one encoded command: room for an admin body of 16
// MiB (the admin API's cap) and what the command adds to it.
const MaxCommandBytes = 24 << 20

// CompactEvery is how many commands the log keeps past its snapshot, at
// least: it also keeps until they hold half as many bytes as the snapshot,
// so that writing snapshots of a large configuration (100,000 recorded
// stubs) costs O(1) amortized per byte logged, not O(n) per command.
const CompactEvery = 1000

// format is the file's layout version, under meta/format.
const format byte = 1

var (
	metaBucket     = []byte("meta")
	logBucket      = []byte("log")
	formatKey      = []byte("format")
	snapshotKey    = []byte("snapshot")
	snapIndexKey   = []byte("snapshot-index")
	errFileVersion = errors.New("configlog: unknown file format")
)

// Options configure a Log.
type Options struct {
	// Path is the bbolt file; "" keeps the log in memory only.
	Path string
	// Reconciler follows every applied command; nil makes none.
	Reconciler config.Reconciler
	Logger     *slog.Logger
}

// Log is a single node's config.Log.
type Log struct {
	opts Options
	db   *bolt.DB // nil in memory

	mu        sync.Mutex // serializes Submit
	state     *config.State
	index     uint64 // of the last applied command
	snapIndex uint64 // the snapshot covers commands up to here
	snapBytes int    // the snapshot's size
	logBytes  int    // the commands' past it
}

var _ config.Log = (*Log)(nil)

// Open opens (creating it if needed) the log at opts.Path and replays it.
// The state it reaches is State(); nothing is reconciled yet: the caller
// starts the running imposters from it.
func Open(opts Options) (*Log, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	l := &Log{opts: opts, state: config.Empty()}
	if opts.Path == "" {
		return l, nil
	}
	db, err := bolt.Open(opts.Path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return nil, fmt.Errorf("configlog: open %s: %w", opts.Path, err)
	}
	if err := l.load(db); err != nil {
		return nil, errors.Join(fmt.Errorf("configlog: load %s: %w", opts.Path, err), db.Close())
	}
	l.db = db
	return l, nil
}

func (l *Log) load(db *bolt.DB) error {
	return db.Update(func(tx *bolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(metaBucket)
		if err != nil {
			return err
		}
		switch f := meta.Get(formatKey); {
		case f == nil:
			if err := meta.Put(formatKey, []byte{format}); err != nil {
				return err
			}
		case len(f) != 1 || f[0] != format:
			return fmt.Errorf("%w %x: this build reads %d", errFileVersion, f, format)
		}
		if b := meta.Get(snapshotKey); b != nil {
			if l.state, err = config.DecodeState(b); err != nil {
				return err
			}
			l.snapIndex = binary.BigEndian.Uint64(meta.Get(snapIndexKey))
			l.snapBytes = len(b)
		}
		l.index = l.snapIndex
		bk, err := tx.CreateBucketIfNotExists(logBucket)
		if err != nil {
			return err
		}
		return bk.ForEach(func(k, v []byte) error {
			i := binary.BigEndian.Uint64(k)
			if i <= l.snapIndex {
				return nil // covered by the snapshot; deleted at the next compaction
			}
			if i != l.index+1 {
				return fmt.Errorf("configlog: command %d follows %d", i, l.index)
			}
			cmd, err := config.DecodeCommand(v)
			if err != nil {
				return fmt.Errorf("command %d: %w", i, err)
			}
			l.logBytes += len(v)
			next, res := config.Apply(l.state, cmd)
			if res.Err != nil {
				// Only applied commands are written; one refused now was
				// accepted by an older build: keep what it found.
				l.opts.Logger.Warn("a logged configuration command no longer applies", "index", i, "op", cmd.Op, "err", res.Err)
			}
			l.state, l.index = next, i
			return nil
		})
	})
}

// State implements config.Log.
func (l *Log) State() *config.State {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state
}

// Submit implements config.Log: apply, prepare, write and fsync, then
// commit the plan. A failure before the commit aborts the plan.
func (l *Log) Submit(ctx context.Context, cmd *config.Command) (config.Result, error) {
	enc, err := config.EncodeCommand(cmd)
	if err != nil {
		return config.Result{}, err
	}
	if len(enc) > MaxCommandBytes {
		return config.Result{}, mberr.New(mberr.PayloadTooLarge,
			fmt.Sprintf("the change is %d bytes; the configuration takes at most %d at a time", len(enc), MaxCommandBytes))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return config.Result{}, err
	}
	next, res := config.Apply(l.state, cmd)
	if res.Err != nil {
		return res, nil
	}
	var plan config.Plan = nopPlan{}
	if l.opts.Reconciler != nil {
		if plan, err = l.opts.Reconciler.Prepare(ctx, l.state, next, res); err != nil {
			return config.Result{}, err
		}
	}
	if err := l.write(l.index+1, enc, next); err != nil {
		plan.Abort()
		e := mberr.New("corrupted database", "cannot save the configuration: "+err.Error())
		e.Status = http.StatusInternalServerError
		return config.Result{}, e
	}
	l.state = next
	l.index++
	plan.Commit()
	return res, nil
}

// write makes command i durable, compacting when the log has grown long.
func (l *Log) write(i uint64, enc []byte, next *config.State) error {
	if l.db == nil {
		return nil
	}
	compact := i-l.snapIndex >= CompactEvery && l.logBytes+len(enc) >= l.snapBytes/2
	var snap []byte
	if compact {
		var err error
		if snap, err = config.EncodeState(next); err != nil {
			return err
		}
	}
	err := l.db.Update(func(tx *bolt.Tx) error {
		if !compact {
			var k [8]byte
			binary.BigEndian.PutUint64(k[:], i)
			return tx.Bucket(logBucket).Put(k[:], enc)
		}
		meta := tx.Bucket(metaBucket)
		var k [8]byte
		binary.BigEndian.PutUint64(k[:], i)
		if err := meta.Put(snapshotKey, snap); err != nil {
			return err
		}
		if err := meta.Put(snapIndexKey, k[:]); err != nil {
			return err
		}
		if err := tx.DeleteBucket(logBucket); err != nil {
			return err
		}
		_, err := tx.CreateBucket(logBucket)
		return err
	})
	switch {
	case err != nil:
	case compact:
		l.snapIndex, l.snapBytes, l.logBytes = i, len(snap), 0
	default:
		l.logBytes += len(enc)
	}
	return err
}

// Close closes the file.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.db == nil {
		return nil
	}
	err := l.db.Close()
	l.db = nil
	return err
}

type nopPlan struct{}

func (nopPlan) Commit() {}
func (nopPlan) Abort()  {}
