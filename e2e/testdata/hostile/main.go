// Command hostile is a client that tries to make controld publish where it
// chooses: it sends API requests whose reply subjects are other
// identities' subjects, then checks it is still served on its own inbox.
// It is a separate process, as an attacker on the network is.
//
//	hostile SERVER MODE TARGET...
//
// MODE is anon (a connection with a key of its own and no login), forged
// (the same, with another key's reply proof) or user:EMAIL:PASSWORD
// (logged in as that user, with its session token as the credential).
// It prints how many requests it sent.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/gpuaas/gpuaas/internal/api"
)

func main() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: hostile SERVER anon|forged|user:EMAIL:PASSWORD TARGET...")
		os.Exit(2)
	}
	n, err := run(os.Args[1], os.Args[2], os.Args[3:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "hostile:", err)
		os.Exit(1)
	}
	fmt.Println(n)
}

func run(server, mode string, targets []string) (int, error) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return 0, err
	}
	opts, proof, err := api.KeyConnOptions(kp)
	if err != nil {
		return 0, err
	}
	nc, err := nats.Connect(server, opts...)
	if err != nil {
		return 0, err
	}
	defer nc.Close()
	header := nats.Header{}
	own := api.NewClient(nc, api.WithReplyProof(proof))
	switch {
	case mode == "anon":
	case mode == "forged":
		other, _ := nkeys.CreateUser()
		forged, err := api.ReplyProof(other)
		if err != nil {
			return 0, err
		}
		header.Set(api.HeaderReplyProof, forged)
	case strings.HasPrefix(mode, "user:"):
		parts := strings.SplitN(mode, ":", 3)
		if len(parts) != 3 {
			return 0, fmt.Errorf("mode %q: want user:EMAIL:PASSWORD", mode)
		}
		login, err := own.Login(context.Background(), api.LoginRequest{Email: parts[1], Password: parts[2]})
		if err != nil {
			return 0, fmt.Errorf("login: %w", err)
		}
		uopts, _ := api.SessionConnOptions(login.Token)
		if nc, err = nats.Connect(server, uopts...); err != nil {
			return 0, err
		}
		defer nc.Close()
		own = api.NewClient(nc, api.WithToken(login.Token))
		header.Set(api.HeaderAuthorization, "Bearer "+login.Token)
	default:
		return 0, fmt.Errorf("unknown mode %q", mode)
	}
	sent := 0
	for i, target := range targets {
		for _, ep := range []string{api.EndpointAuthConfig, api.EndpointProjectCreate, api.EndpointAuthLogin} {
			h := nats.Header{}
			for k, v := range header {
				h[k] = v
			}
			h.Set(api.HeaderIdempotencyKey, fmt.Sprintf("hostile-%d-%d-%s", time.Now().UnixNano(), i, ep))
			body, _ := json.Marshal(map[string]string{"name": fmt.Sprintf("deputy%d", sent)})
			if ep == api.EndpointAuthLogin {
				body, _ = json.Marshal(api.LoginRequest{Email: "nobody@example.com", Password: "x"})
			}
			if err := nc.PublishMsg(&nats.Msg{Subject: api.Subject(ep), Reply: target, Header: h, Data: body}); err != nil {
				return sent, err
			}
			sent++
		}
	}
	if err := nc.Flush(); err != nil {
		return sent, err
	}
	// Still served on its own inbox, after all that.
	if _, err := own.AuthConfig(context.Background()); err != nil {
		return sent, fmt.Errorf("auth.config on its own inbox: %w", err)
	}
	return sent, nil
}
