package session

import "errors"

// ErrBadRecording is returned for input that is not an asciicast v2
// recording.
var ErrBadRecording = errors.New("not an asciicast v2 recording")
