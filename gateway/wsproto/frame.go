// Package wsproto is RFC 6455, the WebSocket protocol, as riftgate speaks
// it on both ends: frames read and written without allocating per message,
// the opening handshake (server and client), close codes, and a Conn that
// answers pings and keeps the close handshake.
//
// It imports nothing of riftgate's: the imposter's ws server, the proxy's
// upstream client and tests share it.
package wsproto

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"unicode/utf8"
)

// Opcodes (RFC 6455 §5.2).
const (
	OpContinuation byte = 0x0
	OpText         byte = 0x1
	OpBinary       byte = 0x2
	OpClose        byte = 0x8
	OpPing         byte = 0x9
	OpPong         byte = 0xA
)

// Close codes (RFC 6455 §7.4.1, and 1012-1014 from IANA's registry).
const (
	CloseNormal          = 1000
	CloseGoingAway       = 1001
	CloseProtocolError   = 1002
	CloseUnsupportedData = 1003
	CloseNoStatus        = 1005 // never sent: a close frame without a code
	CloseAbnormal        = 1006 // never sent: the connection dropped
	CloseInvalidData     = 1007
	ClosePolicyViolation = 1008
	CloseTooBig          = 1009
	CloseMandatoryExt    = 1010
	CloseInternalError   = 1011
	CloseServiceRestart  = 1012
	CloseTryAgainLater   = 1013
)

// maxControl is the largest control frame payload (§5.5).
const maxControl = 125

// ProtocolError is a peer's violation of the protocol, with the close code
// to answer it with.
type ProtocolError struct {
	Code   int
	Reason string
}

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("websocket: %s (close %d)", e.Reason, e.Code)
}

// CloseError is the peer's close frame: its code (CloseNoStatus when it gave
// none) and reason.
type CloseError struct {
	Code   int
	Reason string
}

func (e *CloseError) Error() string {
	return fmt.Sprintf("websocket: closed by peer (%d %q)", e.Code, e.Reason)
}

// ErrTooBig is wrapped in the ProtocolError for a message over the limit.
var ErrTooBig = errors.New("websocket: message too big")

func protocolErr(format string, args ...any) error {
	return &ProtocolError{Code: CloseProtocolError, Reason: fmt.Sprintf(format, args...)}
}

// Reader reads a peer's frames and assembles its messages. A server's
// Reader requires masked frames, a client's unmasked ones (§5.1).
type Reader struct {
	r io.Reader
	// Server: the peer is a client, whose frames must be masked.
	Server bool
	// MaxMessage bounds a whole message (every fragment together); 0 is
	// no bound.
	MaxMessage int

	hdr  [14]byte
	buf  []byte // the data message being read
	ctrl [maxControl]byte
	// fragOp is the opcode of the fragmented message in progress, 0 for
	// none.
	fragOp byte
}

// NewReader returns a Reader of r, which should be buffered: a frame's
// header is read in small pieces.
func NewReader(r io.Reader, server bool, maxMessage int) *Reader {
	return &Reader{r: r, Server: server, MaxMessage: maxMessage}
}

// Reset makes the Reader read r, dropping any partial message.
func (rd *Reader) Reset(r io.Reader) {
	rd.r, rd.buf, rd.fragOp = r, rd.buf[:0], 0
}

// Release lets go of the message buffer when it has grown past keep bytes:
// an idle connection should not hold the largest message it ever read.
func (rd *Reader) Release(keep int) {
	if cap(rd.buf) > keep {
		rd.buf = nil
	}
}

// Next returns the next message: a whole text or binary message (its
// fragments joined), or a control frame (ping, pong, close) as it arrives,
// even between the fragments of a message. The payload is valid until the
// next call. A text message that is not UTF-8 is a ProtocolError with
// CloseInvalidData; one over MaxMessage has CloseTooBig.
func (rd *Reader) Next() (op byte, payload []byte, err error) {
	for {
		fin, op, n, mask, masked, err := rd.header()
		if err != nil {
			return 0, nil, err
		}
		if op >= OpClose {
			p := rd.ctrl[:n]
			if _, err := io.ReadFull(rd.r, p); err != nil {
				return 0, nil, unexpected(err)
			}
			if masked {
				unmask(p, mask, 0)
			}
			if op == OpClose {
				if err := checkClose(p); err != nil {
					return 0, nil, err
				}
			}
			return op, p, nil
		}
		switch {
		case op == OpContinuation && rd.fragOp == 0:
			return 0, nil, protocolErr("continuation frame without a message")
		case op != OpContinuation && rd.fragOp != 0:
			return 0, nil, protocolErr("new message inside a fragmented one")
		case op != OpContinuation:
			rd.buf = rd.buf[:0]
		}
		if rd.MaxMessage > 0 && uint64(len(rd.buf))+n > uint64(rd.MaxMessage) {
			return 0, nil, &ProtocolError{Code: CloseTooBig, Reason: fmt.Sprintf("message over %d bytes", rd.MaxMessage)}
		}
		if n > math.MaxInt32 {
			return 0, nil, &ProtocolError{Code: CloseTooBig, Reason: "frame too long"}
		}
		start := len(rd.buf)
		rd.buf = grow(rd.buf, int(n))
		if _, err := io.ReadFull(rd.r, rd.buf[start:]); err != nil {
			return 0, nil, unexpected(err)
		}
		if masked {
			unmask(rd.buf[start:], mask, 0)
		}
		if op != OpContinuation {
			rd.fragOp = op
		}
		if !fin {
			continue
		}
		op, rd.fragOp = rd.fragOp, 0
		if op == OpText && !utf8.Valid(rd.buf) {
			return 0, nil, &ProtocolError{Code: CloseInvalidData, Reason: "text message is not UTF-8"}
		}
		return op, rd.buf, nil
	}
}

// header reads one frame header.
func (rd *Reader) header() (fin bool, op byte, n uint64, mask [4]byte, masked bool, err error) {
	h := rd.hdr[:2]
	if _, err = io.ReadFull(rd.r, h); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = io.ErrUnexpectedEOF
		}
		return
	}
	fin, op = h[0]&0x80 != 0, h[0]&0x0F
	if h[0]&0x70 != 0 {
		err = protocolErr("reserved bits set without an extension")
		return
	}
	switch op {
	case OpContinuation, OpText, OpBinary, OpClose, OpPing, OpPong:
	default:
		err = protocolErr("unknown opcode %#x", op)
		return
	}
	masked = h[1]&0x80 != 0
	if masked != rd.Server {
		if rd.Server {
			err = protocolErr("client frame is not masked")
		} else {
			err = protocolErr("server frame is masked")
		}
		return
	}
	n = uint64(h[1] & 0x7F)
	if op >= OpClose && (!fin || n > maxControl) {
		err = protocolErr("control frame fragmented or longer than 125 bytes")
		return
	}
	ext := 0
	switch n {
	case 126:
		ext = 2
	case 127:
		ext = 8
	}
	if masked {
		ext += 4
	}
	if ext > 0 {
		e := rd.hdr[2 : 2+ext]
		if _, err = io.ReadFull(rd.r, e); err != nil {
			err = unexpected(err)
			return
		}
		switch n {
		case 126:
			n = uint64(binary.BigEndian.Uint16(e))
			e = e[2:]
		case 127:
			n = binary.BigEndian.Uint64(e)
			if n>>63 != 0 {
				err = protocolErr("frame length has its top bit set")
				return
			}
			e = e[8:]
		}
		if masked {
			copy(mask[:], e)
		}
	}
	return
}

// checkClose checks a close frame's payload: none, or a valid code and a
// UTF-8 reason (§5.5.1, §7.4).
func checkClose(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	if len(p) == 1 {
		return protocolErr("close frame with a one-byte payload")
	}
	if c := int(binary.BigEndian.Uint16(p)); !validCode(c) {
		return protocolErr("invalid close code %d", c)
	}
	if !utf8.Valid(p[2:]) {
		return &ProtocolError{Code: CloseInvalidData, Reason: "close reason is not UTF-8"}
	}
	return nil
}

// validCode reports whether a peer may send close code c.
func validCode(c int) bool {
	switch {
	case c >= 1000 && c <= 1003, c >= 1007 && c <= 1014:
		return true
	case c >= 3000 && c <= 4999:
		return true
	}
	return false
}

// ParseClose reads a close frame's payload (checked by Next): its code,
// CloseNoStatus when it has none, and reason.
func ParseClose(p []byte) (code int, reason string) {
	if len(p) < 2 {
		return CloseNoStatus, ""
	}
	return int(binary.BigEndian.Uint16(p)), string(p[2:])
}

func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// grow extends b by n bytes, keeping its contents.
func grow(b []byte, n int) []byte {
	l := len(b)
	if cap(b)-l >= n {
		return b[:l+n]
	}
	c := 2 * cap(b)
	if c < l+n {
		c = l + n
	}
	if c < 512 {
		c = 512
	}
	nb := make([]byte, l+n, c)
	copy(nb, b)
	return nb
}

// unmask XORs b with the masking key, starting at key position pos, eight
// bytes at a time where it can.
func unmask(b []byte, key [4]byte, pos int) int {
	i := 0
	if len(b) >= 16 {
		var k [8]byte
		for j := range k {
			k[j] = key[(pos+j)&3]
		}
		k64 := binary.LittleEndian.Uint64(k[:])
		for ; i+8 <= len(b); i += 8 {
			v := binary.LittleEndian.Uint64(b[i:])
			binary.LittleEndian.PutUint64(b[i:], v^k64)
		}
	}
	for ; i < len(b); i++ {
		b[i] ^= key[(pos+i)&3]
	}
	return (pos + len(b)) & 3
}

// AppendFrame appends one final frame (op, payload) to dst; a client masks
// it with mask (a server passes nil).
func AppendFrame(dst []byte, op byte, payload []byte, mask *[4]byte) []byte {
	return appendFrame(dst, true, op, payload, mask)
}

// AppendFragment appends one frame of a fragmented message: op for the
// first (OpContinuation for the rest), fin on the last.
func AppendFragment(dst []byte, fin bool, op byte, payload []byte, mask *[4]byte) []byte {
	return appendFrame(dst, fin, op, payload, mask)
}

func appendFrame(dst []byte, fin bool, op byte, payload []byte, mask *[4]byte) []byte {
	b0 := op
	if fin {
		b0 |= 0x80
	}
	var mbit byte
	if mask != nil {
		mbit = 0x80
	}
	n := len(payload)
	switch {
	case n < 126:
		dst = append(dst, b0, mbit|byte(n))
	case n <= math.MaxUint16:
		dst = append(dst, b0, mbit|126, byte(n>>8), byte(n))
	default:
		dst = append(dst, b0, mbit|127)
		dst = binary.BigEndian.AppendUint64(dst, uint64(n))
	}
	if mask == nil {
		return append(dst, payload...)
	}
	dst = append(dst, mask[:]...)
	start := len(dst)
	dst = append(dst, payload...)
	unmask(dst[start:], *mask, 0)
	return dst
}

// AppendClose appends a close frame with code and reason (code 0: none),
// the reason cut to fit a control frame.
func AppendClose(dst []byte, code int, reason string, mask *[4]byte) []byte {
	if code == 0 {
		return AppendFrame(dst, OpClose, nil, mask)
	}
	var p [maxControl]byte
	binary.BigEndian.PutUint16(p[:], uint16(code))
	n := 2 + copy(p[2:], TruncateReason(reason))
	return AppendFrame(dst, OpClose, p[:n], mask)
}

// TruncateReason cuts a close reason to the 123 bytes a close frame holds,
// at a rune boundary.
func TruncateReason(s string) string {
	const max = maxControl - 2
	if len(s) <= max {
		return s
	}
	s = s[:max]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
