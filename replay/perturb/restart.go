package perturb

import (
	"context"
	"fmt"
	"os"
	"os/exec"
)

// RestartClient restarts the controller as client-restart's spec says on
// the command line: it runs Exec through sh -c (and waits for it), or
// sends Signal to process PID. A spec with neither is an error: the Go
// API's harness restarts the controller itself (replay's
// Options.ClientRestart).
func RestartClient(ctx context.Context, sp Spec) error {
	switch {
	case sp.Exec != "":
		out, err := exec.CommandContext(ctx, "sh", "-c", sp.Exec).CombinedOutput()
		if err != nil {
			return fmt.Errorf("exec %q: %v: %s", sp.Exec, err, out)
		}
		return nil
	case sp.Signal != "":
		p, err := os.FindProcess(sp.PID)
		if err == nil {
			err = p.Signal(Signals[sp.Signal])
		}
		if err != nil {
			return fmt.Errorf("signal %s to pid %d: %w", sp.Signal, sp.PID, err)
		}
		return nil
	}
	return fmt.Errorf("client-restart: no harness to restart the controller (exec=CMD or signal=NAME,pid=N on the command line, Options.ClientRestart in the Go API)")
}
