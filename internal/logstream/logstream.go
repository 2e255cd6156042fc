// Package logstream carries the output of what runs on a node (a job's
// stdout and stderr now; a workload's next) through the JetStream stream
// LOGS, bounded per source and in total (docs/decisions/0022-logs-in-jetstream.md).
//
// hostd publishes batches of numbered lines with the Pump, on the subject
// gpuaas.ctl.host.<node>.log.<kind>.<id>: inside the node's own
// gpuaas.ctl.host.<node>.> that the bus already lets it publish to, so a
// node can write only logs under its own id. controld reads a source's
// lines with Read for the API (job.logs); users never touch JetStream.
package logstream

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Stream is the JetStream stream that keeps logs.
const Stream = "LOGS"

// Kinds of log sources: the second-to-last token of a log subject.
const (
	KindJob      = "job"
	KindWorkload = "workload"
)

// Streams a line came from. Marker lines are written by gpuaas itself:
// a bound cut the output, or lines were dropped while the bus was down.
const (
	Stdout = "stdout"
	Stderr = "stderr"
	Marker = "gpuaas"
)

// StreamSubjects are the subjects LOGS captures: every node's log
// subjects (a node's connection may publish only under its own id).
const StreamSubjects = "gpuaas.ctl.host.*.log.>"

// Subject is where node publishes the lines of the source kind/id.
func Subject(node, kind, id string) string {
	return "gpuaas.ctl.host." + node + ".log." + kind + "." + id
}

// CheckToken refuses what cannot be one token of a subject.
func CheckToken(what, s string) error {
	if s == "" || strings.ContainsAny(s, ".*> \t\r\n") {
		return fmt.Errorf("logstream: %s %q is not a subject token", what, s)
	}
	return nil
}

// Line is one line of output. Seq numbers a source's lines from 1 with
// no gap, markers included: a reader that saw N has seen every line up
// to N once.
type Line struct {
	Seq    int64     `json:"n"`
	Time   time.Time `json:"t"`
	Stream string    `json:"s"`
	Text   string    `json:"x"`
	// ck, on a line added with its source's position, is where to resume
	// once it is published (resume.go); never sent.
	ck *Checkpoint
}

// batch is one message on a log subject: consecutive lines of a source.
type batch struct {
	Lines []Line `json:"lines"`
}

func encode(lines []Line) ([]byte, error) { return json.Marshal(batch{Lines: lines}) }

func decode(data []byte) ([]Line, error) {
	var b batch
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("logstream: decode batch: %w", err)
	}
	return b.Lines, nil
}

// Limits bound the LOGS stream: its size and how long logs are kept (they
// outlive the allocation until then). When full, the oldest logs go.
type Limits struct {
	MaxBytes int64
	MaxAge   time.Duration
}

// DuplicateWindow is how long JetStream remembers a batch's id: a batch
// published again within it (its ack was lost) is stored once.
const DuplicateWindow = 2 * time.Minute

// StreamConfig is LOGS' configuration.
func StreamConfig(replicas int, l Limits) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        Stream,
		Description: "Output of jobs and workloads, by node and source (docs/decisions/0022-logs-in-jetstream.md)",
		Subjects:    []string{StreamSubjects},
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		MaxBytes:    l.MaxBytes,
		MaxAge:      l.MaxAge,
		MaxMsgSize:  MaxBatchBytes + 4<<10,
		Duplicates:  DuplicateWindow,
		Replicas:    max(replicas, 1),
	}
}
