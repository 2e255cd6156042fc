package recstore_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gpuaas/gpuaas/internal/recstore"
	"github.com/gpuaas/gpuaas/internal/testutil"
)

func setup(t *testing.T) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	// controld's own identity: every permission there is.
	nc := testutil.NATS(t).Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateOrUpdateStream(t.Context(), recstore.StreamConfig(1, 64<<20, time.Hour)); err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// TestPutSealRead: a recording written in chunks, sealed, reads back
// byte for byte at any offset, and its metadata names its size and digest.
func TestPutSealRead(t *testing.T) {
	_, js := setup(t)
	ctx := t.Context()
	data := make([]byte, 2*recstore.ChunkSize+1234)
	_, _ = rand.Read(data)
	n, err := recstore.Put(ctx, js, "ts-1", bytes.NewReader(data))
	if err != nil || n != 3 {
		t.Fatalf("put: %d chunks, %v; want 3", n, err)
	}
	if _, err := recstore.Open(ctx, js, "ts-1"); !errors.Is(err, recstore.ErrNotFound) {
		t.Fatalf("open before the seal: %v; want not found", err)
	}
	meta, err := recstore.Seal(ctx, js, "ts-1", n, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if meta.Size != int64(len(data)) || meta.Chunks != 3 {
		t.Fatalf("meta %+v; want %d bytes in 3 chunks", meta, len(data))
	}
	for _, c := range []struct{ off, limit int }{{0, len(data)}, {1, 10}, {recstore.ChunkSize - 5, 10},
		{2*recstore.ChunkSize + 1000, 5000}, {len(data), 10}} {
		got, err := recstore.ReadAt(ctx, js, meta, int64(c.off), c.limit)
		want := data[c.off:min(len(data), c.off+c.limit)]
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("read %d+%d: %d bytes, %v; want %d bytes", c.off, c.limit, len(got), err, len(want))
		}
	}
	again, err := recstore.Seal(ctx, js, "ts-1", n, time.Now())
	if err != nil || again.Digest != meta.Digest {
		t.Fatalf("sealing again: %v; want the same recording", err)
	}
}

// TestSealedRecordingCannotBeReplacedNorRemoved: once written, neither a
// chunk nor the metadata can be replaced, deleted or purged — not even
// from controld's own connection, which may publish anywhere — and a seal
// claiming other chunks is refused.
func TestSealedRecordingCannotBeReplacedNorRemoved(t *testing.T) {
	nc, js := setup(t)
	ctx := t.Context()
	data := bytes.Repeat([]byte("x"), recstore.ChunkSize+10)
	n, err := recstore.Put(ctx, js, "ts-2", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	meta, err := recstore.Seal(ctx, js, "ts-2", n, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := recstore.Put(ctx, js, "ts-2", bytes.NewReader([]byte("other"))); !errors.Is(err, recstore.ErrExists) {
		t.Fatalf("a second put: %v; want ErrExists", err)
	}
	if n, err := recstore.Put(ctx, js, "ts-2", bytes.NewReader(data)); err != nil || n != 2 {
		t.Fatalf("the same put again (a crash's retry): %d chunks, %v; want the 2 that are there", n, err)
	}
	for _, subj := range []string{"gpuaas.rec.ts-2.c.0", "gpuaas.rec.ts-2.c.1", "gpuaas.rec.ts-2.meta"} {
		if _, err := js.Publish(ctx, subj, []byte(`{"name":"ts-2","size":1,"chunks":1,"chunk_size":1}`)); err == nil {
			t.Errorf("publishing over %s was accepted", subj)
		}
		// A plain publish, without waiting for the stream's answer.
		if err := nc.Publish(subj, []byte("overwritten")); err != nil {
			t.Fatal(err)
		}
	}
	_ = nc.Flush()
	s, err := js.Stream(ctx, recstore.Stream)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteMsg(ctx, 1); err == nil {
		t.Error("deleting a chunk was accepted")
	}
	if err := s.Purge(ctx); err == nil {
		t.Error("purging the stream was accepted")
	}
	if err := s.Purge(ctx, jetstream.WithPurgeSubject("gpuaas.rec.ts-2.meta")); err == nil {
		t.Error("purging the metadata was accepted")
	}
	if _, err := recstore.Seal(ctx, js, "ts-2", 1, time.Now()); err == nil {
		t.Error("sealing with another chunk count was accepted")
	}
	got, err := recstore.Open(ctx, js, "ts-2")
	if err != nil || got.Digest != meta.Digest || got.Size != meta.Size {
		t.Fatalf("after the attempts: %+v, %v; want %+v", got, err, meta)
	}
	read, err := recstore.ReadAt(ctx, js, got, 0, len(data))
	if err != nil || !bytes.Equal(read, data) {
		t.Fatalf("after the attempts the recording reads %d bytes, %v; want what was written", len(read), err)
	}
}

// TestSealRefusesMissingOrShortChunks: a seal claiming chunks that are not
// there, or a chunk that is not full before the last, is refused.
func TestSealRefusesMissingOrShortChunks(t *testing.T) {
	_, js := setup(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	if _, err := recstore.Put(ctx, js, "ts-3", bytes.NewReader([]byte("short"))); err != nil {
		t.Fatal(err)
	}
	if _, err := recstore.Seal(ctx, js, "ts-3", 2, time.Now()); !errors.Is(err, recstore.ErrMismatch) {
		t.Fatalf("seal of 2 chunks when 1 was written: %v; want ErrMismatch", err)
	}
	if _, err := recstore.Seal(ctx, js, "bad.name", 1, time.Now()); !errors.Is(err, recstore.ErrMismatch) {
		t.Fatalf("seal of a bad name: %v; want refused", err)
	}
}
