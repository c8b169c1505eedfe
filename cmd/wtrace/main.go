// Command wtrace records Kubernetes watch streams from packet captures into
// session files, shows what they hold, and replays them to real clients.
//
// Run `wtrace --help` for the commands.
package main

import "os"

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }
