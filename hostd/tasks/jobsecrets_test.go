package tasks_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	"github.com/gpuaas/gpuaas/internal/api"
	"github.com/gpuaas/gpuaas/internal/hostproto"
	"github.com/gpuaas/gpuaas/internal/nodeseal"
)

// TestJobStartOpensItsSealedEnv: the values controld sealed to this node
// (internal/nodeseal) are in the job's environment with its plain env; an
// env sealed to another node, or a hostd without a key, fails the task
// without starting the job and without naming a value.
func TestJobStartOpensItsSealedEnv(t *testing.T) {
	t.Parallel()
	const alloc = "a-jobsecret001"
	env, user := jobHost(t, alloc)
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if env.Sealed, err = nodeseal.NewOpener(priv.Seed()); err != nil {
		t.Fatal(err)
	}
	const value = "the-sealed-value"
	sealed, err := nodeseal.Seal(pub, []byte(`["TOKEN=`+value+`"]`))
	if err != nil {
		t.Fatal(err)
	}
	p := hostproto.JobStartParams{JobID: "j-sealed1", AllocationID: alloc, PosixUser: user, Wait: time.Minute,
		Run: `test "$TOKEN" = ` + value + ` && test "$PLAIN" = x`, Env: []string{"PLAIN=x"}, SealedEnv: sealed}
	out, _, err := run(t, env, api.TaskJobStart, p)
	if r := jobReport(t, out, err); !r.Ended || r.ExitCode != 0 {
		t.Fatalf("job with a sealed env: %+v; want it to see TOKEN and PLAIN and exit 0", r)
	}

	otherPub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	elsewhere, err := nodeseal.Seal(otherPub, []byte(`["TOKEN=`+value+`"]`))
	if err != nil {
		t.Fatal(err)
	}
	p.JobID, p.SealedEnv = "j-sealed2", elsewhere
	if _, _, err := run(t, env, api.TaskJobStart, p); err == nil || !strings.Contains(err.Error(), "secret env") || strings.Contains(err.Error(), value) {
		t.Errorf("env sealed to another node: err = %v; want a refusal naming the secret env, not the value", err)
	}
	env.Sealed = nil
	p.JobID, p.SealedEnv = "j-sealed3", sealed
	if _, _, err := run(t, env, api.TaskJobStart, p); err == nil || !strings.Contains(err.Error(), "cannot open secrets") {
		t.Errorf("hostd without a key: err = %v; want cannot open secrets", err)
	}
}
