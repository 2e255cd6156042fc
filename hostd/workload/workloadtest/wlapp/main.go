// Command wlapp is the program of the test workloads' image
// (workloadtest.Image): "serve" prints a line and runs until SIGTERM,
// "exit N" prints three lines and exits N, "files" writes a file owned by
// a non-root container user and then serves.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
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
}
