package core

import (
	"encoding/json"
	"strings"
	"testing"
)

// asciicast is a recording as a test reads it (sshgate/proxy_test.go has
// the same reader for what reaches the store).
type asciicast struct {
	header struct {
		Version   int               `json:"version"`
		Width     int               `json:"width"`
		Height    int               `json:"height"`
		Timestamp int64             `json:"timestamp"`
		Env       map[string]string `json:"env"`
	}
	output  string
	resizes []string
	markers []string
	times   []float64
}

func parseCast(t *testing.T, data []byte) asciicast {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	var c asciicast
	if err := json.Unmarshal([]byte(lines[0]), &c.header); err != nil {
		t.Fatalf("header %q: %v", lines[0], err)
	}
	var out strings.Builder
	for _, l := range lines[1:] {
		var ev []any
		if err := json.Unmarshal([]byte(l), &ev); err != nil || len(ev) != 3 {
			t.Fatalf("event %q: %v", l, err)
		}
		at, _ := ev[0].(float64)
		code, _ := ev[1].(string)
		data, _ := ev[2].(string)
		c.times = append(c.times, at)
		switch code {
		case "o":
			out.WriteString(data)
		case "r":
			c.resizes = append(c.resizes, data)
		case "m":
			c.markers = append(c.markers, data)
		default:
			t.Fatalf("event %q: unknown code", l)
		}
	}
	c.output = out.String()
	return c
}

// TestSFTP: the sftp subsystem through the gateway, bytes intact both ways.
