// Command wlapp is the program of the test workloads' image
// (workloadtest.Image): "serve" prints a line and runs until SIGTERM,
// "exit N" prints three lines and exits N, "files" writes a file owned by
// a non-root container user and then serves. After SIGTERM it waits
// STOP_DELAY and then says so to NOTIFY (host:port) when set. "count N D"
// prints a counter, "n 1" to "n N", one line every D (every 4th on
// standard error), and exits 0. "http PORT D" serves HTTP on loopback
// port PORT after D (GET /ready answers 200, anything else 404) until
// SIGTERM. "write FILE TEXT" writes TEXT to FILE and "cat FILE" prints
// FILE, then exit (1, with the error, when they cannot).
package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Println("usage: wlapp serve|exit N|files")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "exit":
		code, _ := strconv.Atoi(os.Args[2])
		for i := 1; i <= 3; i++ {
			fmt.Printf("line %d of a workload that exits %d\n", i, code)
		}
		os.Exit(code)
	case "count":
		n, _ := strconv.Atoi(os.Args[2])
		d, _ := time.ParseDuration(os.Args[3])
		for i := 1; i <= n; i++ {
			w := os.Stdout
			if i%4 == 0 {
				w = os.Stderr
			}
			fmt.Fprintf(w, "n %d\n", i)
			time.Sleep(d)
		}
		os.Exit(0)
	case "http":
		d, _ := time.ParseDuration(os.Args[3])
		fmt.Printf("listening on port %s in %s\n", os.Args[2], d)
		time.Sleep(d)
		ln, err := net.Listen("tcp", "127.0.0.1:"+os.Args[2])
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		mux := http.NewServeMux()
		mux.HandleFunc("GET /ready", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ready") })
		go func() { _ = http.Serve(ln, mux) }()
		fmt.Println("listening")
	case "write": // write FILE TEXT: exits 1 saying why when it cannot
		if err := os.WriteFile(os.Args[2], []byte(os.Args[3]), 0o644); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println("wrote", os.Args[2])
		os.Exit(0)
	case "cat": // cat FILE: prints it
		b, err := os.ReadFile(os.Args[2])
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Printf("%s\n", b)
		os.Exit(0)
	case "files":
		if err := os.WriteFile("/owned", []byte("x"), 0o600); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		if err := os.Chown("/owned", 1000, 1000); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	fmt.Printf("serving as uid %d, GREETING=%s\n", os.Getuid(), os.Getenv("GREETING"))
	<-term
	fmt.Println("got SIGTERM")
	// STOP_DELAY: a workload that takes its time to stop (flushing,
	// checkpointing), as long as its grace allows.
	if d, err := time.ParseDuration(os.Getenv("STOP_DELAY")); err == nil {
		time.Sleep(d)
	}
	// NOTIFY=host:port: tell a listener there (the test, through the host
	// network) that SIGTERM came.
	if addr := os.Getenv("NOTIFY"); addr != "" {
		if c, err := net.Dial("tcp", addr); err == nil {
			fmt.Fprintln(c, "SIGTERM", os.Getenv("GREETING"))
			c.Close()
		}
	}
}
