// Package sshtest holds the SSH helpers that the tests of sshgate,
// hostd/term and hostd/sim share: keys, signers and certificate signers
// made in the test, a CA, client authentication played one step at a
// time, running a command and collecting its output and exit status,
// reading a stream until some text shows up, a loopback echo server to
// forward to, and running OpenSSH's own tools.
//
// Everything is real: keys are generated, servers listen on 127.0.0.1:0,
// and a helper that cannot do its part fails the test.
package sshtest
