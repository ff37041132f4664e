// Command pause is the pod sandbox's process: the first process of every pod, which
// holds the pod's namespaces open while its containers come and go.
//
// It does three things, and nothing else:
//   - sleeps until a signal arrives;
//   - reaps every child it inherits (SIGCHLD, then wait4 until none is left), so a pod
//     that shares its PID namespace never collects zombies;
//   - exits 0 on SIGINT or SIGTERM.
//
// It is sprout's own, in place of upstream's pause.c, so the sandbox image is built
// from a Go module like the rest of the stack.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// version is this program's own; it changes when main.go does.
var version = "1.0"

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "-v", "--version", "version":
			fmt.Println("pause", version, "(sprout)")
			return
		}
	}
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "pause: warning: not running as PID 1")
	}
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range signals {
		if s == syscall.SIGCHLD {
			reap()
			continue
		}
		fmt.Fprintf(os.Stderr, "pause: shutting down, got signal %v\n", s)
		os.Exit(0)
	}
}

// reap collects every child that has exited. Signals coalesce, so one SIGCHLD may stand
// for several exits: loop until wait4 reports none left (0) or no children (ECHILD).
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if err != nil || pid <= 0 {
			return
		}
	}
}
