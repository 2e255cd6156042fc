package registry

import (
	"errors"
	"net"
)

// isUnreachable tells a registry that did not answer (the check could not
// happen: nothing is recorded) from one that answered about the image (an
// HTTP error, a bad manifest: a failed check). Transport failures reach
// us as *url.Error, a net.Error.
func isUnreachable(err error) bool {
	var ne net.Error
	return errors.As(err, &ne)
}
