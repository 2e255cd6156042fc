package sshgate

import "syscall"

// raiseFileLimit raises this process's open-file limit towards need, as
// far as the hard limit allows, and returns the limit in force.
func raiseFileLimit(need uint64) (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	if lim.Cur >= need {
		return lim.Cur, nil
	}
	lim.Cur = min(need, lim.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	return lim.Cur, nil
}
