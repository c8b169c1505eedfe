//go:build !unix

package runner

import "os/exec"

func ownGroup(*exec.Cmd) {}

func terminate(cmd *exec.Cmd) { cmd.Process.Kill() }

func kill(cmd *exec.Cmd) { cmd.Process.Kill() }
