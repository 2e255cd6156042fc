package sshwire

import (
	"sync/atomic"
	"syscall"
)

// signals is the one table of the signals SSH names (RFC 4254 §6.10):
// the name on the wire, its number on Linux (which is what exit codes
// report, 128+n, whatever the machine recording them runs), and the
// host's own.
var signals = []struct {
	name  string
	linux int
	sys   syscall.Signal
}{
	{"HUP", 1, syscall.SIGHUP},
	{"INT", 2, syscall.SIGINT},
	{"QUIT", 3, syscall.SIGQUIT},
	{"ILL", 4, syscall.SIGILL},
	{"ABRT", 6, syscall.SIGABRT},
	{"FPE", 8, syscall.SIGFPE},
	{"KILL", 9, syscall.SIGKILL},
	{"USR1", 10, syscall.SIGUSR1},
	{"SEGV", 11, syscall.SIGSEGV},
	{"USR2", 12, syscall.SIGUSR2},
	{"PIPE", 13, syscall.SIGPIPE},
	{"ALRM", 14, syscall.SIGALRM},
	{"TERM", 15, syscall.SIGTERM},
}

// Signal is the host's signal for an SSH signal name ("INT"); ok is false
// for a name SSH does not define.
func Signal(name string) (sig syscall.Signal, ok bool) {
	for _, s := range signals {
		if s.name == name {
			return s.sys, true
		}
	}
	return 0, false
}

// SignalName is the SSH name of sig, for exit-signal; "" when SSH has
// none.
func SignalName(sig syscall.Signal) string {
	for _, s := range signals {
		if s.sys == sig {
			return s.name
		}
	}
	return ""
}

// LinuxSignalNumber is the Linux number of an SSH signal name, for the
// exit code of a session a signal ended (128+n, as shells report); 0 for
// a name SSH does not define.
func LinuxSignalNumber(name string) int {
	for _, s := range signals {
		if s.name == name {
			return s.linux
		}
	}
	return 0
}

// WatchSignals registers a channel with register (a gliderlabs session's
// Signals) and calls deliver with each signal's name until stop is called;
// after stop, signals are drained and dropped until done closes (the
// connection's end). It never unregisters: gliderlabs/ssh replays signals
// that came before registration from a goroutine that reads the channel
// field without its lock, so Signals(nil) races it — and an unread channel
// would block the session's request loop.
func WatchSignals[S ~string](register func(chan<- S), done <-chan struct{}, deliver func(name string)) (stop func()) {
	sigs := make(chan S, 8)
	var stopped atomic.Bool
	register(sigs)
	go func() {
		for {
			select {
			case sig := <-sigs:
				if !stopped.Load() {
					deliver(string(sig))
				}
			case <-done:
				return
			}
		}
	}()
	return func() { stopped.Store(true) }
}
