// Package recstore keeps terminal recordings in a JetStream stream sealed
// per object: each chunk and each recording's metadata is a subject of its
// own that holds one message, ever. The stream refuses a second message on
// a subject (DiscardNewPerSubject with one message per subject), deletes
// and purges (DenyDelete, DenyPurge), so once written nothing — not the
// gateway that wrote it, not controld, not a request's reply aimed at it —
// can replace or remove a recording; only the stream's limits (age, bytes)
// retire recordings. The gateway writes the chunks (Put); controld reads
// them back, checks them and writes the metadata (Seal), which is what
// makes a recording exist (Open).
//
// NATS's object store cannot be sealed this way: every chunk of an object
// shares one subject and its metadata is rolled up (purged) on each write
// (docs/decisions/0002-sealed-recordings.md).
package recstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Stream is the recordings stream's name.
const Stream = "RECORDINGS"

// subjectPrefix is the recordings stream's subject space:
// gpuaas.rec.<session>.c.<n> (chunk n) and gpuaas.rec.<session>.meta.
const subjectPrefix = "gpuaas.rec"

// ChunkSubjects are the subjects a writer of chunks (the gateway) may
// publish to: chunks, never metadata.
const ChunkSubjects = subjectPrefix + ".*.c.*"

// WriterSubjects are what a writer of chunks may publish to: the chunks,
// and the stream's information and direct reads (Put compares a chunk
// that is already there, after a crash, with what it would write).
var WriterSubjects = []string{ChunkSubjects, "$JS.API.STREAM.INFO." + Stream, "$JS.API.DIRECT.GET." + Stream + ".>"}

// ChunkSize is the size of every chunk but a recording's last: well under
// NATS's default 1 MiB message limit.
const ChunkSize = 256 << 10

// MaxSize bounds one recording (Seal refuses more).
const MaxSize = 4 << 30

// Errors.
var (
	// ErrNotFound: no recording (no metadata) by that name.
	ErrNotFound = errors.New("recording not found")
	// ErrExists: the name is taken; a recording is never replaced.
	ErrExists = errors.New("recording exists")
	// ErrMismatch: the chunks are not what the writer said it wrote.
	ErrMismatch = errors.New("recording does not match its chunks")
)

// Meta describes a sealed recording.
type Meta struct {
	Name      string    `json:"name"`
	Size      int64     `json:"size"`
	Chunks    int       `json:"chunks"`
	ChunkSize int       `json:"chunk_size"`
	Digest    string    `json:"digest"` // SHA-256=<base64url>
	SealedAt  time.Time `json:"sealed_at"`
}

// StreamConfig is the recordings stream with replicas copies, at most
// maxBytes bytes and recordings no older than maxAge. When it is full new
// recordings are refused rather than old ones dropped: retention is by
// age (and an operator's alert as it fills).
func StreamConfig(replicas int, maxBytes int64, maxAge time.Duration) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:                 Stream,
		Description:          "asciicast v2 recordings of PTY sessions through sshgate, sealed per chunk and per recording",
		Subjects:             []string{subjectPrefix + ".>"},
		Storage:              jetstream.FileStorage,
		Replicas:             replicas,
		MaxBytes:             maxBytes,
		MaxAge:               maxAge,
		MaxMsgsPerSubject:    1,
		Discard:              jetstream.DiscardNew,
		DiscardNewPerSubject: true,
		DenyDelete:           true,
		DenyPurge:            true,
		AllowDirect:          true,
	}
}

// ValidName reports whether name can name a recording: one subject
// token of letters, digits, '-' and '_'.
func ValidName(name string) bool {
	if name == "" || len(name) > 128 {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

func chunkSubject(name string, n int) string {
	return subjectPrefix + "." + name + ".c." + strconv.Itoa(n)
}

func metaSubject(name string) string { return subjectPrefix + "." + name + ".meta" }

// publishOnce publishes data to subj only if subj holds nothing yet.
func publishOnce(ctx context.Context, js jetstream.JetStream, subj string, data []byte) error {
	_, err := js.PublishMsg(ctx, &nats.Msg{Subject: subj, Data: data},
		jetstream.WithExpectLastSequencePerSubject(0))
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		strings.Contains(apiErr.Description, "maximum messages per subject exceeded")) {
		return fmt.Errorf("%s: %w", subj, ErrExists)
	}
	return err
}

// Put writes r as the chunks of recording name and returns how many it
// wrote; Seal then makes the recording exist. A chunk already there with
// the same bytes (an upload a crash cut short, done again) is kept; one
// with other bytes is ErrExists.
func Put(ctx context.Context, js jetstream.JetStream, name string, r io.Reader) (int, error) {
	if !ValidName(name) {
		return 0, fmt.Errorf("put recording %q: not a valid name", name)
	}
	buf := make([]byte, ChunkSize)
	n := 0
	for {
		k, err := io.ReadFull(r, buf)
		if k > 0 {
			if perr := putChunk(ctx, js, chunkSubject(name, n), buf[:k]); perr != nil {
				return n, fmt.Errorf("put recording %s: %w", name, perr)
			}
			n++
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("put recording %s: %w", name, err)
		}
	}
}

func putChunk(ctx context.Context, js jetstream.JetStream, subj string, data []byte) error {
	err := publishOnce(ctx, js, subj, data)
	if !errors.Is(err, ErrExists) {
		return err
	}
	s, serr := js.Stream(ctx, Stream)
	if serr != nil {
		return serr
	}
	m, gerr := s.GetLastMsgForSubject(ctx, subj)
	if gerr != nil {
		return gerr
	}
	if !bytes.Equal(m.Data, data) {
		return err
	}
	return nil
}

// Seal reads back the chunks chunks of recording name, checks that every
// chunk but the last is full, and writes its metadata. Sealing again a
// recording sealed with the same chunks returns its metadata unchanged.
func Seal(ctx context.Context, js jetstream.JetStream, name string, chunks int, now time.Time) (*Meta, error) {
	if !ValidName(name) || chunks <= 0 || int64(chunks)*ChunkSize > MaxSize+ChunkSize {
		return nil, fmt.Errorf("seal recording %q of %d chunks: %w", name, chunks, ErrMismatch)
	}
	s, err := js.Stream(ctx, Stream)
	if err != nil {
		return nil, fmt.Errorf("seal recording %s: %w", name, err)
	}
	h := sha256.New()
	var size int64
	for i := range chunks {
		m, err := s.GetLastMsgForSubject(ctx, chunkSubject(name, i))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, fmt.Errorf("seal recording %s: chunk %d is missing: %w", name, i, ErrMismatch)
		}
		if err != nil {
			return nil, fmt.Errorf("seal recording %s: %w", name, err)
		}
		if i < chunks-1 && len(m.Data) != ChunkSize || len(m.Data) == 0 {
			return nil, fmt.Errorf("seal recording %s: chunk %d holds %d bytes: %w", name, i, len(m.Data), ErrMismatch)
		}
		h.Write(m.Data)
		size += int64(len(m.Data))
	}
	meta := &Meta{Name: name, Size: size, Chunks: chunks, ChunkSize: ChunkSize,
		Digest: "SHA-256=" + base64.RawURLEncoding.EncodeToString(h.Sum(nil)), SealedAt: now.UTC()}
	data, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	err = publishOnce(ctx, js, metaSubject(name), data)
	if errors.Is(err, ErrExists) {
		old, oerr := Open(ctx, js, name)
		if oerr != nil {
			return nil, oerr
		}
		if old.Size != meta.Size || old.Chunks != meta.Chunks || old.Digest != meta.Digest {
			return nil, fmt.Errorf("seal recording %s: sealed before with other chunks: %w", name, ErrExists)
		}
		return old, nil
	}
	if err != nil {
		return nil, fmt.Errorf("seal recording %s: %w", name, err)
	}
	return meta, nil
}

// Open returns recording name's metadata, or ErrNotFound.
func Open(ctx context.Context, js jetstream.JetStream, name string) (*Meta, error) {
	if !ValidName(name) {
		return nil, fmt.Errorf("recording %q: %w", name, ErrNotFound)
	}
	s, err := js.Stream(ctx, Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, fmt.Errorf("recording %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("recording %s: %w", name, err)
	}
	m, err := s.GetLastMsgForSubject(ctx, metaSubject(name))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, fmt.Errorf("recording %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("recording %s: %w", name, err)
	}
	var meta Meta
	if err := json.Unmarshal(m.Data, &meta); err != nil || meta.Name != name || meta.ChunkSize <= 0 {
		return nil, fmt.Errorf("recording %s: unreadable metadata", name)
	}
	return &meta, nil
}

// ReadAt reads up to limit bytes of a sealed recording from off.
func ReadAt(ctx context.Context, js jetstream.JetStream, meta *Meta, off int64, limit int) ([]byte, error) {
	if off < 0 || off > meta.Size {
		return nil, fmt.Errorf("read recording %s at %d: outside its %d bytes", meta.Name, off, meta.Size)
	}
	s, err := js.Stream(ctx, Stream)
	if err != nil {
		return nil, fmt.Errorf("read recording %s: %w", meta.Name, err)
	}
	want := min(int64(limit), meta.Size-off)
	out := make([]byte, 0, want)
	for int64(len(out)) < want {
		pos := off + int64(len(out))
		i := int(pos / int64(meta.ChunkSize))
		m, err := s.GetLastMsgForSubject(ctx, chunkSubject(meta.Name, i))
		if err != nil {
			return nil, fmt.Errorf("read recording %s chunk %d: %w", meta.Name, i, err)
		}
		from := int(pos % int64(meta.ChunkSize))
		if from >= len(m.Data) {
			return nil, fmt.Errorf("read recording %s chunk %d: shorter than its metadata says", meta.Name, i)
		}
		out = append(out, m.Data[from:min(len(m.Data), from+int(want)-len(out))]...)
	}
	return out, nil
}
