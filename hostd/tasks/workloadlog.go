package tasks

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"time"

	hostenv "github.com/gpuaas/gpuaas/hostd/env"
	"github.com/gpuaas/gpuaas/hostd/workload"
	"github.com/gpuaas/gpuaas/internal/logstream"
)

// Workloads' output to LOGS (docs/decisions/0026-workload-logs-across-restarts.md):
// hostd follows each container's log file from workload.start (or, after
// a restart, from where its state file says it stopped) until the
// container ended and its last lines are published. workload.status and
// workload.stop report a container's end only after that, so a reader
// that sees the workload ended has every line.

// wlLogSets holds each node's followers by their state directory: a
// handler's Env is copied per task; a restarted hostd (even in the same
// process) stops the old set first (FollowWorkloadLogs).
var wlLogSets sync.Map // dir → *wlLogSet

// wlLogSet follows this node's workloads' logs.
type wlLogSet struct {
	states workload.LogStates
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// mu protects m.
	mu sync.Mutex
	m  map[string]*wlLog
}

// wlLog is one workload's follower; done is closed when it stopped, and
// cancel stops it.
type wlLog struct {
	allocID string
	done    chan struct{}
	cancel  context.CancelFunc
}

// workloadLogs is this node's set of followers; nil when it keeps no
// logs (no publisher, state directory or environments).
func (e *Env) workloadLogs() *wlLogSet {
	if e.Logs == nil || e.StateDir == "" || e.Envs == nil || logstream.CheckToken("node", e.NodeID) != nil {
		return nil
	}
	dir := filepath.Join(e.StateDir, "workload-logs")
	if s, ok := wlLogSets.Load(dir); ok {
		return s.(*wlLogSet)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s, loaded := wlLogSets.LoadOrStore(dir, &wlLogSet{states: workload.LogStates{Dir: dir}, ctx: ctx, cancel: cancel,
		m: map[string]*wlLog{}})
	if loaded {
		cancel()
	}
	return s.(*wlLogSet)
}

// FollowWorkloadLogs re-attaches, when hostd starts, to the log of every
// workload whose state file says it is not done, and returns what stops
// every follower when hostd stops (they go on from their checkpoints at
// the next start).
func FollowWorkloadLogs(env *Env) (stop func()) {
	s := env.workloadLogs()
	if s == nil {
		return func() {}
	}
	sts, err := s.states.Unfinished()
	if err != nil {
		env.Log.Warn("workload logs: re-attach", "err", err)
	}
	for _, st := range sts {
		s.follow(env, st)
		env.Log.Info("workload log re-attached", "workload", st.WorkloadID, "allocation", st.AllocationID)
	}
	return func() {
		s.cancel()
		s.wg.Wait()
		wlLogSets.CompareAndDelete(s.states.Dir, s)
	}
}

// ensureWorkloadLog follows workload id's log unless it is followed or
// done; st's bound applies to a workload without a state file yet. It
// returns the follower (nil when this node keeps no logs).
func ensureWorkloadLog(env *Env, st workload.LogState) *wlLog {
	s := env.workloadLogs()
	if s == nil {
		return nil
	}
	if old, found, err := s.states.Load(st.WorkloadID); err == nil && found {
		st = old
	}
	return s.follow(env, st)
}

// awaitWorkloadLog waits, at most logFlushTimeout, until the follower of
// a container that ended has published its last lines.
func awaitWorkloadLog(w *wlLog) {
	if w == nil {
		return
	}
	select {
	case <-w.done:
	case <-time.After(logFlushTimeout):
	}
}

func (s *wlLogSet) follow(env *Env, st workload.LogState) *wlLog {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w, ok := s.m[st.WorkloadID]; ok {
		return w
	}
	ctx, cancel := context.WithCancel(s.ctx)
	w := &wlLog{allocID: st.AllocationID, done: make(chan struct{}), cancel: cancel}
	s.m[st.WorkloadID] = w
	if st.Done || s.ctx.Err() != nil {
		close(w.done)
		return w
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(w.done)
		if err := s.run(ctx, env, st); err != nil && ctx.Err() == nil {
			env.Log.Warn("workload log", "workload", st.WorkloadID, "err", err)
		}
	}()
	return w
}

// forget waits (bounded) for the followers of allocation allocID to end,
// stops those that did not, and removes their state: the release removed
// their containers, and no podman of theirs may run as the user once its
// processes are ended (usermod refuses a user with processes).
func (s *wlLogSet) forget(allocID string) {
	s.mu.Lock()
	var ids []string
	var ws []*wlLog
	for id, w := range s.m {
		if w.allocID == allocID {
			ids, ws = append(ids, id), append(ws, w)
		}
	}
	s.mu.Unlock()
	for _, w := range ws {
		awaitWorkloadLog(w)
		w.cancel()
		<-w.done
	}
	for _, id := range ids {
		// Its follower stays in s.m, ended: a workload.status that comes
		// after the release starts no other.
		_ = s.states.Remove(id)
	}
}

// run follows one workload's log to its end (or until hostd stops).
func (s *wlLogSet) run(ctx context.Context, env *Env, st workload.LogState) error {
	e, err := env.Envs.Open(ctx, hostenv.Alloc{ID: st.AllocationID, PosixUser: st.PosixUser})
	if err != nil {
		return err
	}
	defer e.Close()
	pm, err := workload.Open(e)
	if err != nil {
		return err
	}
	files, uid, err := workloadLogFiles(ctx, pm) // workload_guest.go
	if err != nil {
		return err
	}
	name := workload.ContainerName(st.WorkloadID)
	c, found, err := pm.Inspect(ctx, name)
	if err != nil {
		return err
	}
	if !found || c.HostConfig.LogConfig.Path == "" {
		st.Done = true // no container (or no log file): nothing to read
		return s.states.Save(st)
	}
	var mu sync.Mutex
	save := func(ck logstream.Checkpoint) {
		mu.Lock()
		defer mu.Unlock()
		st.Checkpoint = &ck
		if err := s.states.Save(st); err != nil {
			env.Log.Warn("workload log state", "workload", st.WorkloadID, "err", err)
		}
	}
	pump, err := logstream.NewPump(logstream.PumpConfig{Publisher: env.Logs,
		Subject: logstream.Subject(env.NodeID, logstream.KindWorkload, st.WorkloadID), ID: st.WorkloadID,
		MaxBytes: st.MaxBytes, Resume: st.Checkpoint, OnSent: save, Now: env.now})
	if err != nil {
		return err
	}
	if st.Checkpoint == nil {
		save(logstream.Checkpoint{Next: 1}) // followed: a restart re-attaches
	}
	// The watch ends with this follower: no podman of it runs as the user
	// once it is done (a release ends the user's processes next).
	wctx, wcancel := context.WithCancel(ctx)
	ended, watched := watchEnd(wctx, pm, name)
	defer func() { wcancel(); <-watched }()
	lf := &workload.LogFollower{Path: c.HostConfig.LogConfig.Path, UID: uid, Pump: pump, Ended: ended, Files: files}
	if files != nil {
		lf.Poll = guestLogPoll
	}
	if st.Checkpoint != nil {
		lf.From = st.Checkpoint.Pos
	}
	ferr := lf.Run(ctx)
	if ctx.Err() != nil {
		pump.Abandon() // hostd stops: the next one goes on from the checkpoint
		return nil
	}
	if ferr != nil {
		pump.Mark("hostd could not read the rest of the container's log: " + ferr.Error())
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), logFlushTimeout)
	defer cancel()
	if stats := pump.Close(cctx); stats.Unsent > 0 {
		ferr = errors.Join(ferr, errors.New("last lines not published: "+stats.PublishErr))
	}
	mu.Lock()
	st.Done = true
	err = s.states.Save(st)
	mu.Unlock()
	return errors.Join(ferr, err)
}

// watchEnd is closed once the container is no longer running: podman wait
// as its user, again while inspect says it runs (a wait killed early). An
// inspect that fails three times running (the user's storage reset at
// release) counts as the end: the follower then reads the file to its end.
func watchEnd(ctx context.Context, pm workload.Podman, name string) (ended, stopped <-chan struct{}) {
	end, stop := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stop)
		failed := 0
		for {
			_ = pm.Wait(ctx, name)
			if ctx.Err() != nil {
				return
			}
			c, found, err := pm.Inspect(ctx, name)
			if err != nil {
				failed++
			}
			if failed >= 3 || (err == nil && (!found || (c.State.Status != "running" && c.State.Status != "paused"))) {
				close(end)
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return end, stop
}
