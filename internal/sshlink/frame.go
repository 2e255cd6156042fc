package sshlink

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync"

	gossh "golang.org/x/crypto/ssh"
)

const (
	frameOpen byte = iota + 1
	frameOpenConfirm
	frameOpenFailure
	frameData
	frameExtData
	frameEOF
	frameClose
	frameWindowAdjust
	frameChanRequest
	frameChanSuccess
	frameChanFailure
	frameGlobalRequest
	frameGlobalSuccess
	frameGlobalFailure
	frameAuth
	frameAuthOK
	frameAuthFail
)

const (
	headerLen     = 9
	maxData       = 64 << 10  // max data payload per frame
	maxControl    = 256 << 10 // max payload of any other frame
	initialWindow = 2 << 20
	// readBufSize is the reader's own buffer: a header and a small
	// control frame. Data payloads are read from the TLS connection
	// straight into their receive chunk (bufio reads past its buffer when
	// it is empty), and an idle link holds no large buffer of its own.
	readBufSize = 512
)

// bufPool holds frame buffers big enough for a header plus the largest data
// payload (with the extended-data code).
var bufPool = sync.Pool{New: func() any {
	b := make([]byte, headerLen+4+maxData)
	return &b
}}

// chunkPool holds receive chunks for data payloads.
var chunkPool = sync.Pool{New: func() any {
	b := make([]byte, maxData)
	return &b
}}

func putHeader(b []byte, typ byte, id uint32, n int) {
	b[0] = typ
	binary.BigEndian.PutUint32(b[1:5], id)
	binary.BigEndian.PutUint32(b[5:9], uint32(n))
}

// appendString appends a uint32-length-prefixed byte string.
func appendString(b []byte, s []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

// requestHeader is what a request frame (channel or global) carries
// before its payload: the want-reply byte and the request's name.
func requestHeader(name string, wantReply bool) []byte {
	want := []byte{0}
	if wantReply {
		want[0] = 1
	}
	return appendString(want, []byte(name))
}

// parseRequest reads a request frame's payload (requestHeader, then the
// request's own payload, copied out of the read buffer).
func parseRequest(p []byte) (*gossh.Request, bool) {
	if len(p) < 1 {
		return nil, false
	}
	name, payload, ok := parseString(p[1:])
	if !ok {
		return nil, false
	}
	return &gossh.Request{Type: string(name), WantReply: p[0] != 0, Payload: append([]byte(nil), payload...)}, true
}

// parseString reads a uint32-length-prefixed byte string.
func parseString(b []byte) (s, rest []byte, ok bool) {
	if len(b) < 4 {
		return nil, nil, false
	}
	n := binary.BigEndian.Uint32(b)
	b = b[4:]
	if uint64(n) > uint64(len(b)) {
		return nil, nil, false
	}
	return b[:n], b[n:], true
}

func parseUint32(b []byte) (uint32, []byte, bool) {
	if len(b) < 4 {
		return 0, nil, false
	}
	return binary.BigEndian.Uint32(b), b[4:], true
}

// readHeader reads one frame header and checks the length bound.
func readHeader(r io.Reader, hdr *[headerLen]byte) (typ byte, id uint32, n int, err error) {
	if _, err = io.ReadFull(r, hdr[:]); err != nil {
		return 0, 0, 0, err
	}
	typ = hdr[0]
	id = binary.BigEndian.Uint32(hdr[1:5])
	n64 := binary.BigEndian.Uint32(hdr[5:9])
	lim := uint32(maxControl)
	switch typ {
	case frameData:
		lim = maxData
	case frameExtData:
		lim = maxData + 4
	}
	if n64 > lim {
		return 0, 0, 0, fmt.Errorf("%w: %w: type %d length %d", ErrProtocol, ErrFrameTooLarge, typ, n64)
	}
	return typ, id, int(n64), nil
}
