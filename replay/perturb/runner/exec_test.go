//go:build unix

package runner_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/wtrace/wtrace/replay/perturb/runner"
)

// TestExec: the command gets the replay's kubeconfig and URL in its
// environment, ExecOptions.Env besides, and stop ends what the shell
// started (its process group), not only the shell; a second stop does
// nothing.
func TestExec(t *testing.T) {
	tests := []struct {
		name, command string
	}{
		{"exec", `echo "$KUBECONFIG $WTRACE_REPLAY_URL $EXTRA" > "$OUT"; exec sleep 600`},
		{"child of the shell", `sleep 600 & echo $! > "$OUT.pid"; echo "$KUBECONFIG $WTRACE_REPLAY_URL $EXTRA" > "$OUT"; wait`},
		{"ignores SIGTERM", `trap '' TERM; echo "$KUBECONFIG $WTRACE_REPLAY_URL $EXTRA" > "$OUT"; sleep 600 & wait; wait`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "ignores SIGTERM" && testing.Short() {
				t.Skip("waits out runner.StopGrace")
			}
			out := filepath.Join(t.TempDir(), "env")
			start := runner.Exec(tt.command, runner.ExecOptions{Env: []string{"OUT=" + out, "EXTRA=x"}})
			stop, err := start(context.Background(), "http://127.0.0.1:1", "/kc")
			if err != nil {
				t.Fatalf("start: %v", err)
			}
			var got []byte
			for i := 0; i < 500 && len(got) == 0; i++ { // the shell writes it at once; a bound, not a measurement
				got, _ = os.ReadFile(out)
				if len(got) == 0 {
					sleepABit()
				}
			}
			stop()
			stop()
			if want := "/kc http://127.0.0.1:1 x"; strings.TrimSpace(string(got)) != want {
				t.Errorf("the command's environment: %q; want %q", got, want)
			}
			if b, err := os.ReadFile(out + ".pid"); err == nil {
				pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
				gone := false
				for i := 0; i < 500 && !gone; i++ { // until init reaped it: a bound, not a measurement
					gone = syscall.Kill(pid, 0) == syscall.ESRCH
					if !gone {
						sleepABit()
					}
				}
				if !gone {
					t.Errorf("the shell's child %d still runs after stop", pid)
				}
			}
		})
	}
}
