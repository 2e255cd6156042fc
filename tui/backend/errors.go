package backend

import "errors"

// ErrUnsupported is returned by optional Backend calls the server does not
// answer (an older controld, or one without billing).
var ErrUnsupported = errors.New("not supported by this server")
