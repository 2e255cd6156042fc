package api

import (
	"context"
	"fmt"
	"io"
)

// RecordingChunkMax is the most a chunk holds (its base64 stays well
// under NATS's default 1 MiB payload limit).
const RecordingChunkMax = 512 << 10

// RecordingRequest asks for up to Limit bytes of a session's recording
// from Offset.
type RecordingRequest struct {
	ID     string `json:"id"`
	Offset int64  `json:"offset"`
	Limit  int    `json:"limit,omitempty"`
}

// RecordingChunk is a part of a recording.
type RecordingChunk struct {
	Data []byte `json:"data"`
	// Size is the recording's whole size.
	Size int64 `json:"size"`
	// EOF is set on the chunk that ends the recording.
	EOF bool `json:"eof"`
}

// SessionRecording copies a session's recording to w, chunk by chunk.
func (c *Client) SessionRecording(ctx context.Context, id string, w io.Writer) (int64, error) {
	var off int64
	for {
		chunk, err := Do(ctx, c, OpSessionRecording, RecordingRequest{ID: id, Offset: off, Limit: RecordingChunkMax})
		if err != nil {
			return off, err
		}
		n, err := w.Write(chunk.Data)
		off += int64(n)
		if err != nil {
			return off, fmt.Errorf("write recording: %w", err)
		}
		if chunk.EOF || len(chunk.Data) == 0 {
			return off, nil
		}
	}
}
