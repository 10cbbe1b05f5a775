package reqlog

import "context"

// What a cluster's members lend one another to show an imposter's
// requests as every member recorded them: each reads the others' logs in
// pages, so that no member holds them all. The gateway implements Source
// over its imposters; the cluster runtime carries pages between members
// and hands each member's back as a Stream.

// Page is a page of one node's recorded requests.
type Page struct {
	// Records are records (this package's encoding), oldest first.
	Records [][]byte
	// Next is the number to ask for next; More says there may be later
	// requests.
	Next int64
	More bool
}

// Source is one node's own recordings, by imposter port.
type Source interface {
	// Count returns the numberOfRequests of the imposter on port; ok is
	// false when there is none here.
	Count(port int) (count int64, ok bool)
	// Page returns the records of the requests numbered from and up,
	// oldest first, about maxBytes of them; ok is false when there is no
	// imposter on port here.
	Page(port int, from int64, maxBytes int) (page Page, ok bool, err error)
	// Reset forgets the imposter's requests and its count.
	Reset(port int)
}

// Stream is one member's recorded requests, oldest first, read as they
// are needed.
type Stream interface {
	// Next returns the next record, valid until the next call; ok is
	// false at the end or on an error.
	Next(ctx context.Context) (rec []byte, ok bool)
	// Err says why the stream ended early, naming the member.
	Err() error
	Close()
}
