package agent

// Unacked counts the results controld has not acknowledged yet (tests).
func (a *Agent) Unacked() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, r := range a.records {
		if r.State == stateDone && !r.Acked {
			n++
		}
	}
	return n
}
