package host

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
)

// Where cron and at keep users' jobs: Debian's and Ubuntu's, Red Hat's,
// SUSE's. A crontab is a file named after the user; at jobs are files the
// user owns.
var (
	crontabDirs = []string{"/var/spool/cron/crontabs", "/var/spool/cron/tabs", "/var/spool/cron"}
	atJobDirs   = []string{"/var/spool/cron/atjobs", "/var/spool/at", "/var/spool/atjobs"}
)

// removeJobs removes the user's crontab and at jobs (a job file of cron
// or at owned by uid, whatever its name), and returns how many. cron and
// atd notice a spool that changed at their next pass.
func removeJobs(name string, uid int) (int, error) {
	n := 0
	var errs []error
	remove := func(p string) {
		if err := os.Remove(p); err == nil {
			n++
		} else if !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	for _, dir := range slices.Concat(crontabDirs, atJobDirs) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
				errs = append(errs, err)
			}
			continue
		}
		for _, e := range entries {
			fi, err := e.Info()
			if err != nil || !fi.Mode().IsRegular() {
				continue
			}
			st := fi.Sys().(*syscall.Stat_t)
			crontab := e.Name() == name && slices.Contains(crontabDirs, dir)
			if crontab || int(st.Uid) == uid {
				remove(filepath.Join(dir, e.Name()))
			}
		}
	}
	return n, errors.Join(errs...)
}
