package runner

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"
)

// StopGrace is how long an Exec controller gets to exit after SIGTERM
// before it is killed: client-go's controllers stop their informers and
// workers within a second; kube-controller-manager within a few.
const StopGrace = 10 * time.Second

// ExecOptions says where an Exec controller's output goes (nil:
// discarded) and what it gets besides its environment.
type ExecOptions struct {
	Stdout, Stderr io.Writer
	// Env is added to the process's environment (KEY=VALUE).
	Env []string
}

// Exec is a Start that runs command through sh -c, in a process group of
// its own, with KUBECONFIG set to the replay's kubeconfig and
// WTRACE_REPLAY_URL to its URL; stop sends the group SIGTERM and, after
// StopGrace, SIGKILL, and returns once the shell has exited.
func Exec(command string, opts ExecOptions) Start {
	return func(ctx context.Context, url, kubeconfig string) (func(), error) {
		cmd := exec.Command("sh", "-c", command)
		cmd.Env = append(append(os.Environ(), opts.Env...), "KUBECONFIG="+kubeconfig, "WTRACE_REPLAY_URL="+url)
		cmd.Stdout, cmd.Stderr = opts.Stdout, opts.Stderr
		ownGroup(cmd)
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("runner: %q: %w", command, err)
		}
		exited := make(chan struct{})
		go func() {
			cmd.Wait()
			close(exited)
		}()
		stop := func() {
			select {
			case <-exited:
				return
			default:
			}
			terminate(cmd)
			t := time.NewTimer(StopGrace)
			defer t.Stop()
			select {
			case <-exited:
			case <-t.C:
				kill(cmd)
				<-exited
			}
		}
		return stop, nil
	}
}
