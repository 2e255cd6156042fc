package sshlink

import (
	"crypto/tls"
	"net"
)

func tlsClient(nc net.Conn) *tls.Conn {
	return tls.Client(nc, &tls.Config{MinVersion: tls.VersionTLS13, InsecureSkipVerify: true})
}
