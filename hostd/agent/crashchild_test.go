package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/gpuaas/gpuaas/hostd/agent"
	"github.com/gpuaas/gpuaas/hostd/tasks"
	"github.com/gpuaas/gpuaas/internal/api"
)

// The crash tests (crash_test.go, tag faultinject) run hostd as a child
// process of the test binary, so that it can be killed (SIGKILL) at a
// crash point: these name its state directory and NATS server.
const (
	childDirEnv  = "GPUAAS_TEST_HOSTD_CHILD_DIR"
	childNATSEnv = "GPUAAS_TEST_HOSTD_CHILD_NATS"
	runsFile     = "runs.log"
)

// countingRegistry is the fake host's registry whose health probe and
// vm_release also append a line to dir/runs.log per run (its type and
// params), so runs are counted across processes.
func countingRegistry(dir string) tasks.Registry {
	reg := newFakeHost().registry()
	for _, typ := range []string{api.TaskHealthProbe, api.TaskVMRelease} {
		h := reg[typ]
		reg[typ] = func(ctx context.Context, env *tasks.Env, params json.RawMessage, rep tasks.Reporter) (any, error) {
			f, err := os.OpenFile(filepath.Join(dir, runsFile), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
			if err != nil {
				return nil, err
			}
			_, err = fmt.Fprintf(f, "%s %s\n", typ, params)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return nil, err
			}
			return h(ctx, env, params, rep)
		}
	}
	return reg
}

// runChildAgent is the child's main: an enrolled agent on the state
// directory named by childDirEnv, until it crashes (or a minute passes).
// It reports whether this process is such a child.
func runChildAgent() bool {
	dir := os.Getenv(childDirEnv)
	if dir == "" {
		return false
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a, err := agent.New(agent.Config{Server: os.Getenv(childNATSEnv), StateDir: dir, Env: &tasks.Env{},
		Handlers: countingRegistry(dir), Log: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child agent:", err)
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "child agent:", err)
		os.Exit(2)
	}
	os.Exit(3) // not crashed
	return true
}
