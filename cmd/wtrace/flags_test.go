package main

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/wtrace/wtrace/internal/hostfilter"
)

// parse runs the command line args of one command built with its runF (as
// cli/cli tests its NewCmdX): flags are parsed and checked, the command
// does not run. It returns what runF got, or the error before it.
func parse[O any](t *testing.T, newCmd func(streams, func(*O) error) *cobra.Command, args ...string) (*O, error) {
	t.Helper()
	var got *O
	var out bytes.Buffer
	s := streams{in: strings.NewReader(""), out: &out, err: &out}
	root := newRootCmd(s)
	cmd := newCmd(s, func(o *O) error { got = o; return nil })
	for _, c := range root.Commands() {
		if c.Name() == cmd.Name() {
			root.RemoveCommand(c)
		}
	}
	root.AddCommand(cmd)
	root.SetArgs(append([]string{cmd.Name()}, args...))
	err := root.Execute()
	return got, err
}

// isUsage reports whether err is a usage error (exit status 2).
func isUsage(err error) bool {
	var ue *usageError
	return err != nil && (errors.As(err, &ue) || isCobraUsage(err))
}

// checkParse is one command line: the fields of the options it must give
// (by name), or a usage error whose message holds usage.
type checkParse struct {
	args  []string
	want  map[string]any
	usage string
}

func runParse[O any](t *testing.T, newCmd func(streams, func(*O) error) *cobra.Command, cases []checkParse) {
	t.Helper()
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			o, err := parse(t, newCmd, tc.args...)
			if tc.usage != "" {
				if !isUsage(err) || !strings.Contains(err.Error(), tc.usage) || o != nil {
					t.Fatalf("parse(%q) = %+v, %v; want a usage error saying %q", tc.args, o, err, tc.usage)
				}
				return
			}
			if err != nil || o == nil {
				t.Fatalf("parse(%q) = %v; want options", tc.args, err)
			}
			v := reflect.ValueOf(o).Elem()
			for name, want := range tc.want {
				f := v.FieldByName(name)
				if !f.IsValid() {
					t.Fatalf("no field %s in %T", name, o)
				}
				// Unexported fields: compared as printed.
				if got, w := fmt.Sprintf("%#v", f), fmt.Sprintf("%#v", want); got != w {
					t.Errorf("parse(%q): %s = %s; want %s", tc.args, name, got, w)
				}
			}
		})
	}
}

// The flags of every command are parsed and checked without running it.

func TestParseRecord(t *testing.T) {
	runParse(t, newRecordCmd, []checkParse{
		{args: []string{"--pcap", "c.pcap", "-o", "s.wt"}, want: map[string]any{"pcap": "c.pcap", "out": "s.wt", "memLimit": "192MiB",
			"acceptHosts": hostfilter.DefaultAcceptHosts, "rejectPaths": hostfilter.DefaultRejectPaths}},
		{args: []string{"--proxy", "-o", "s.wt", "--accept-hosts", `^replay\.svc$`, "--reject-paths", ""},
			want: map[string]any{"proxy": true, "acceptHosts": `^replay\.svc$`, "rejectPaths": ""}},
		{args: []string{"--iface", "lo", "--port", "8001", "--host", "127.0.0.1", "--max-size", "2GiB", "--rotate", "-o", "s.wt"},
			want: map[string]any{"iface": "lo", "port": 8001, "hosts": []string{"127.0.0.1"}, "maxSize": "2GiB", "rotate": true}},
		{args: []string{"--proxy", "--max-duration", "1h", "-o", "s.wt"}, want: map[string]any{"maxDuration": time.Hour}},
		{args: []string{"-o", "s.wt"}, usage: "exactly one source"},
		{args: []string{"--pcap", "c.pcap"}, usage: "-o OUT.wt is required"},
		{args: []string{"--pcap", "c.pcap", "-o", "s.wt", "--accept-hosts", "x"}, usage: "--accept-hosts goes with --proxy"},
		{args: []string{"--pcap", "c.pcap", "-o", "s.wt", "--health-listen", ":8081"}, usage: "--health-listen goes with --proxy"},
		{args: []string{"--proxy", "-o", "s.wt", "--health-listen", "127.0.0.1:8081", "--log-format", "json"},
			want: map[string]any{"healthListen": "127.0.0.1:8081", "logFormat": "json", "metrics": true}},
		{args: []string{"--proxy", "-o", "s.wt", "--accept-hosts", "("}, usage: "accept-hosts"},
		{args: []string{"--proxy", "-o", "s.wt", "--reject-paths", "a,["}, usage: "reject-paths"},
		{args: []string{"--pcap", "c.pcap", "-o", "s.wt", "--rotate"}, usage: "--rotate applies to live recordings"},
		{args: []string{"--pcap", "c.pcap", "-o", "s.wt", "--block-size", "1KiB"}, usage: "--block-size"},
		{args: []string{"--iface", "lo", "-o", "s.wt", "--pcap-out", "s.wt"}, usage: "must differ"},
		{args: []string{"--pcap", "c.pcap", "-o", "s.wt", "extra"}, usage: "no arguments"},
	})
}

func TestParseReplay(t *testing.T) {
	runParse(t, newReplayCmd, []checkParse{
		{args: []string{"s.wt"}, want: map[string]any{"path": "s.wt", "speed": 1.0, "listen": "127.0.0.1:8080", "writes": "answer",
			"acceptHosts": hostfilter.DefaultAcceptHosts, "rejectPaths": hostfilter.DefaultRejectPaths}},
		{args: []string{"s.wt", "--speed", "0", "--loop", "--out", "run.wt", "--keep-secrets", "--accept-hosts", ".*", "--reject-paths", ""},
			want: map[string]any{"speed": 0.0, "loop": true, "out": "run.wt", "keepSecrets": true, "acceptHosts": ".*", "rejectPaths": ""}},
		{args: []string{"s.wt", "--cert", "c.pem", "--key", "k.pem"}, want: map[string]any{"useTLS": true}},
		{args: []string{"s.wt", "--speed", "-1"}, usage: "--speed"},
		{args: []string{"s.wt", "--cert", "c.pem"}, usage: "--cert and --key go together"},
		{args: []string{"s.wt", "--writes", "sometimes"}, usage: "--writes"},
		{args: []string{"s.wt", "--keep-secrets"}, usage: "--keep-secrets applies to --out"},
		{args: []string{"s.wt", "--accept-hosts", "*"}, usage: "accept-hosts"},
		{args: []string{"s.wt", "--pace", "quiet", "--quiet-window", "2s", "--client", "user-agent=kube-controller-manager", "--exit-when-done"},
			want: map[string]any{"pace": "quiet", "quietWindow": 2 * time.Second, "clients": []string{"user-agent=kube-controller-manager"}, "exitWhenDone": true}},
		{args: []string{"s.wt", "--pace", "later"}, usage: "--pace"},
		{args: []string{"s.wt", "--log-format", "xml"}, usage: "--log-format"},
		{args: []string{"s.wt", "--shutdown-grace", "-1s"}, usage: "--shutdown-grace"},
		{args: []string{"s.wt", "--log-format", "json", "--metrics=false", "--shutdown-grace", "5s"},
			want: map[string]any{"logFormat": "json", "metrics": false, "shutdownGrace": 5 * time.Second}},
		{args: []string{"s.wt", "--client", "none", "--client", "all"}, usage: "--client"},
		{args: []string{"s.wt", "--writes", "recorded", "--exit-when-done"}, usage: "--exit-when-done"},
		{args: []string{}, usage: "one session file"},
	})
}

func TestParseOthers(t *testing.T) {
	t.Run("export", func(t *testing.T) {
		runParse(t, newExportCmd, []checkParse{
			{args: []string{"--format", "HAR", "s.wt", "-o", "s.har"}, want: map[string]any{"format": "har", "path": "s.wt", "out": "s.har"}},
			{args: []string{"--format", "jsonl", "--data", "s.wt"}, want: map[string]any{"data": true, "out": "-"}},
			{args: []string{"s.wt"}, usage: "--format is required"},
			{args: []string{"--format", "csv", "s.wt"}, usage: "unknown --format"},
			{args: []string{"--format", "pcap", "--data", "s.wt"}, usage: "--data applies to --format jsonl only"},
		})
	})
	t.Run("merge", func(t *testing.T) {
		runParse(t, newMergeCmd, []checkParse{
			{args: []string{"a.wt", "b.wt", "-o", "m.wt"}, want: map[string]any{"inputs": []string{"a.wt", "b.wt"}, "out": "m.wt"}},
			{args: []string{"a.wt", "b.wt"}, usage: "-o is required"},
			{args: []string{"-o", "m.wt"}, usage: "expects session files"},
		})
	})
	t.Run("slice", func(t *testing.T) {
		runParse(t, newSliceCmd, []checkParse{
			{args: []string{"s.wt", "-o", "x.wt", "--from", "1m", "--namespace", "a", "--namespace", "b", "--exchange", "3"},
				want: map[string]any{"in": "s.wt", "out": "x.wt", "from": "1m", "namespaces": []string{"a", "b"}, "exchanges": []int64{3}}},
			{args: []string{"s.wt"}, usage: "-o is required"},
		})
	})
	t.Run("verify", func(t *testing.T) {
		runParse(t, newVerifyCmd, []checkParse{
			{args: []string{"--repair", "fixed.wt", "s.wt"}, want: map[string]any{"repair": "fixed.wt", "path": "s.wt"}},
			{args: []string{"--repair", "-", "s.wt"}, usage: "--repair needs a file"},
		})
	})
	t.Run("inspect", func(t *testing.T) {
		runParse(t, newInspectCmd, []checkParse{
			{args: []string{"--json", "--anomalies", "0", "s.wt"}, want: map[string]any{"json": true, "anomalies": 0, "path": "s.wt"}},
			{args: []string{"a.wt", "b.wt"}, usage: "one session file"},
		})
	})
	t.Run("events", func(t *testing.T) {
		runParse(t, newEventsCmd, []checkParse{
			{args: []string{"--type", "ADDED,DELETED", "--kind", "ConfigMap", "s.wt"}, want: map[string]any{"types": []string{"ADDED", "DELETED"}, "kinds": []string{"ConfigMap"}}},
			{args: []string{"--nope", "s.wt"}, usage: "unknown flag"},
		})
	})
	t.Run("version", func(t *testing.T) {
		runParse(t, newVersionCmd, []checkParse{
			{args: []string{}, want: map[string]any{"output": ""}},
			{args: []string{"--output", "json"}, want: map[string]any{"output": "json"}},
			{args: []string{"--output", "yaml"}, usage: "--output"},
			{args: []string{"x"}, usage: "no arguments"},
		})
	})
	t.Run("perturb plan", func(t *testing.T) {
		runParse(t, newPerturbPlanCmd, []checkParse{
			{args: []string{"s.wt"}, want: map[string]any{"path": "s.wt", "max": 40, "output": "text"}},
			{args: []string{"s.wt", "--max", "-1", "--kind", "gone,restart", "--client", "^kcm/", "--output", "json"},
				want: map[string]any{"max": -1, "kinds": []string{"gone", "restart"}, "client": "^kcm/", "output": "json"}},
			{args: []string{"s.wt", "--max", "0"}, usage: "--max 0"},
			{args: []string{"s.wt", "--kind", "explode"}, usage: "--kind \"explode\""},
			{args: []string{"s.wt", "--output", "yaml"}, usage: "--output"},
			{args: []string{}, usage: "one session file"},
		})
	})
	t.Run("perturb run", func(t *testing.T) {
		runParse(t, newPerturbRunCmd, []checkParse{
			{args: []string{"s.wt", "--exec", "ctl", "--spec", "gone:at=write:2", "--spec", "restart"},
				want: map[string]any{"exec": "ctl", "specs": []string{"gone:at=write:2", "restart"}, "timeout": 3 * time.Minute, "output": "text"}},
			{args: []string{"s.wt", "--exec", "ctl", "--plan", "--max", "4", "--keep", "runs", "--output", "json", "-v"},
				want: map[string]any{"usePlan": true, "max": 4, "keep": "runs", "output": "json", "verbose": true}},
			{args: []string{"s.wt", "--plan"}, usage: "--exec is required"},
			{args: []string{"s.wt", "--exec", "ctl"}, usage: "--spec SPEC (repeatable) or --plan"},
			{args: []string{"s.wt", "--exec", "ctl", "--plan", "--spec", "gone"}, usage: "give one"},
			{args: []string{"s.wt", "--exec", "ctl", "--spec", "explode"}, usage: "unknown kind"},
			{args: []string{"s.wt", "--exec", "ctl", "--plan", "--timeout", "0s"}, usage: "positive durations"},
		})
	})
	t.Run("diff", func(t *testing.T) {
		runParse(t, newDiffCmd, []checkParse{
			{args: []string{"a.wt", "b.wt", "--only", "write", "--max", "0"}, want: map[string]any{"a": "a.wt", "b": "b.wt", "only": []string{"write"}, "max": 0}},
			{args: []string{"a.wt"}, usage: "two session files"},
		})
	})
}

// TestEveryCommandParsed: every command of the root has a parse test
// above (a new command gets one).
func TestEveryCommandParsed(t *testing.T) {
	tested := map[string]bool{"record": true, "replay": true, "export": true, "merge": true, "slice": true, "verify": true, "inspect": true, "events": true, "diff": true, "report": true, "version": true, "push": true, "pull": true, "perturb": true}
	for _, c := range newRootCmd(streams{}).Commands() {
		if !tested[c.Name()] && c.Name() != "help" && c.Name() != "completion" {
			t.Errorf("command %s has no parse test", c.Name())
		}
	}
}

func TestParseArtifacts(t *testing.T) {
	t.Run("push", func(t *testing.T) {
		runParse(t, newPushCmd, []checkParse{
			{args: []string{"s.wt", "127.0.0.1:5000/sessions/s:v1"}, want: map[string]any{"path": "s.wt", "ref": "127.0.0.1:5000/sessions/s:v1"}},
			{args: []string{"s.wt", "oci://r.example/s:v1", "--plain-http", "--allow-unredacted"}, want: map[string]any{"plainHTTP": true, "allowUnredacted": true}},
			{args: []string{"s.wt", "UPPER/case:x"}, usage: "could not parse reference"},
			{args: []string{"s.wt"}, usage: "a session file and a registry reference"},
		})
	})
	t.Run("pull", func(t *testing.T) {
		runParse(t, newPullCmd, []checkParse{
			{args: []string{"r.example/s:v1", "-o", "s.wt"}, want: map[string]any{"source": "r.example/s:v1", "out": "s.wt", "maxSize": "64GiB"}},
			{args: []string{"https://x.example/s.wt", "-o", "s.wt", "--max-size", "1GiB"}, want: map[string]any{"maxSize": "1GiB"}},
			{args: []string{"r.example/s:v1"}, usage: "-o is required"},
			{args: []string{"r.example/s:v1", "-o", "s.wt", "--max-size", "lots"}, usage: "--max-size"},
		})
	})
}
