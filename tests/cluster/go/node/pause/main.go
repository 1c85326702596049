// Command pause is the pod sandbox's process: it holds the pod's namespaces and does nothing
// else until it is told to stop. Kubernetes' own pause image is a C program fetched from a
// registry; the tests have no registry, so the node builds this one (static, CGO_ENABLED=0) and
// imports it as the sandbox image.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	// As PID 1 of the pod's PID namespace (shareProcessNamespace) it also reaps orphans.
	signal.Notify(signals, syscall.SIGCHLD)
	for s := range signals {
		if s == syscall.SIGCHLD {
			for {
				pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
			continue
		}
		os.Exit(0)
	}
}
