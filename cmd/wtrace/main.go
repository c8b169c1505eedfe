// Command wtrace records Kubernetes watch streams from packet captures into
// session files, shows what they hold, and replays them to real clients.
//
// Run `wtrace --help` for the commands.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// A reader that stops early (wtrace events … | head) is not an error:
	// writes then fail with EPIPE, and run exits quietly.
	signal.Ignore(syscall.SIGPIPE)
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
