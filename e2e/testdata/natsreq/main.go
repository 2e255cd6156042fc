// Command natsreq sends one raw NATS request and exits: the smallest
// separate process that does what `gpuaas alloc list` does on the wire,
// the baseline of BenchmarkCLIWallTime. Like the CLI, it presents the
// session token as its NATS credential.
//
//	natsreq SERVER SUBJECT TOKEN
package main

import (
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gpuaas/gpuaas/internal/api"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: natsreq SERVER SUBJECT TOKEN")
		os.Exit(2)
	}
	opts, _ := api.SessionConnOptions(os.Args[3])
	nc, err := nats.Connect(os.Args[1], opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer nc.Close()
	msg := nats.NewMsg(os.Args[2])
	msg.Header.Set("Authorization", "Bearer "+os.Args[3])
	msg.Data = []byte("{}")
	reply, err := nc.RequestMsg(msg, 10*time.Second)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if code := reply.Header.Get("Nats-Service-Error-Code"); code != "" {
		fmt.Fprintln(os.Stderr, "error reply:", code, string(reply.Data))
		os.Exit(1)
	}
	fmt.Println(len(reply.Data))
}
