package auth

import (
	"fmt"
	"sync"
	"time"
)

// defaultWaitReminder is how often a login waiting on the identity
// provider says it still waits.
const defaultWaitReminder = time.Minute

// waitNotice says on stderr that the login now waits for something only
// the person at the identity provider can do (approve a code, come back
// from the browser), how long that can take, and that Ctrl-C stops it;
// then it repeats how much time is left every opts.WaitReminder until
// stop is called. An IdP that fails in the browser (a wrong password, an
// unknown client) sends nothing back, so this is all the CLI can show.
// subject names what expires ("the code", "this login").
func waitNotice(opts *LoginOptions, waitingFor, subject string, lifetime time.Duration) (stop func()) {
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	w := opts.IO.ErrOut
	deadline := now().Add(lifetime)
	if lifetime <= 0 {
		fmt.Fprintf(w, "Waiting for %s. Press Ctrl-C to stop.\n", waitingFor)
		return func() {}
	}
	fmt.Fprintf(w, "Waiting for %s; %s expires in %s (at %s). Press Ctrl-C to stop.\n",
		waitingFor, subject, lifetime.Round(time.Second), deadline.Local().Format(time.TimeOnly))
	every := opts.WaitReminder
	if every <= 0 {
		every = defaultWaitReminder
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if left := deadline.Sub(now()); left > 0 {
					fmt.Fprintf(w, "Still waiting for %s (%s left; Ctrl-C stops).\n", waitingFor, left.Round(time.Second))
				}
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(done); wg.Wait() })
	}
}
