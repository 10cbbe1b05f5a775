package reqlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"sync"
)

// The on-disk layout of a log: a folder of segment files, 00000001.seg and
// up, each a header then chunks appended one after the other:
//
//	segment header: "RGRQ" | u16 version (1) | u16 zero
//	chunk:          "RQC1" | u32 payload length | u32 records | u64 first record's number | u32 CRC-32C of the payload | payload
//	payload:        (uvarint record length | record)*
//
// Integers are little-endian. A record is record.go's encoding, whose
// version is the segment header's.
const (
	segMagic   = "RGRQ"
	segVersion = 1
	segHdrLen  = 8

	chunkMagic  = "RQC1"
	chunkHdrLen = 24
	segSuffix   = ".seg"
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

func segHeader() []byte {
	h := make([]byte, segHdrLen)
	copy(h, segMagic)
	binary.LittleEndian.PutUint16(h[4:], segVersion)
	return h
}

// putChunkHeader fills the header room at the start of buf, whose payload
// follows it.
func putChunkHeader(buf []byte, n int, first int64) {
	payload := buf[chunkHdrLen:]
	copy(buf, chunkMagic)
	binary.LittleEndian.PutUint32(buf[4:], uint32(len(payload)))
	binary.LittleEndian.PutUint32(buf[8:], uint32(n))
	binary.LittleEndian.PutUint64(buf[12:], uint64(first))
	binary.LittleEndian.PutUint32(buf[20:], crc32.Checksum(payload, crcTable))
}

// chunkHeader is a chunk's header, read back.
type chunkHeader struct {
	size  int // payload bytes
	n     int
	first int64
	crc   uint32
}

var errBadChunk = errors.New("reqlog: bad chunk")

func readChunkHeader(h []byte) (chunkHeader, error) {
	if len(h) < chunkHdrLen || string(h[:4]) != chunkMagic {
		return chunkHeader{}, errBadChunk
	}
	ch := chunkHeader{
		size:  int(binary.LittleEndian.Uint32(h[4:])),
		n:     int(binary.LittleEndian.Uint32(h[8:])),
		first: int64(binary.LittleEndian.Uint64(h[12:])),
		crc:   binary.LittleEndian.Uint32(h[20:]),
	}
	// Every record takes two bytes at least (its length and its kind).
	if ch.n <= 0 || ch.size < 2*ch.n || ch.first < 0 {
		return chunkHeader{}, errBadChunk
	}
	return ch, nil
}

// segment is one open segment file. Its refs count its log (while the
// segment is part of it), chunks waiting to be written into it and
// snapshots reading it; the last release closes the file.
type segment struct {
	f    *os.File
	path string
	no   int
	// size is where the next chunk goes; live counts the log's chunks in
	// the file. Both are guarded by the log's mutex.
	size int64
	live int

	mu   sync.Mutex
	refs int
}

func (s *segment) acquire() {
	s.mu.Lock()
	s.refs++
	s.mu.Unlock()
}

func (s *segment) release() {
	s.mu.Lock()
	s.refs--
	last := s.refs == 0
	s.mu.Unlock()
	if last {
		_ = s.f.Close() // read-only by now, or written with WriteAt, whose errors were seen
	}
}

// readChunk reads the chunk at off into buf (grown as needed) and returns
// its payload, checked against its header.
func (s *segment) readChunk(off int64, size int, buf []byte) ([]byte, []byte, error) {
	need := chunkHdrLen + size
	if cap(buf) < need {
		buf = make([]byte, need)
	}
	buf = buf[:need]
	if _, err := s.f.ReadAt(buf, off); err != nil {
		return nil, buf, fmt.Errorf("reqlog: read %s at %d: %w", s.path, off, err)
	}
	h, err := readChunkHeader(buf)
	if err == nil && (h.size != size || crc32.Checksum(buf[chunkHdrLen:], crcTable) != h.crc) {
		err = errBadChunk
	}
	if err != nil {
		return nil, buf, fmt.Errorf("reqlog: %s at %d: %w", s.path, off, err)
	}
	return buf[chunkHdrLen:], buf, nil
}

// recordOffsets appends where each record of payload starts and ends.
func recordOffsets(payload []byte, dst [][2]int) ([][2]int, error) {
	dst = dst[:0]
	at := 0
	for at < len(payload) {
		n, k := binary.Uvarint(payload[at:])
		if k <= 0 || n > uint64(len(payload)-at-k) {
			return dst, errCorrupt
		}
		start := at + k
		at = start + int(n)
		dst = append(dst, [2]int{start, at})
	}
	return dst, nil
}
