package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// complete runs the shell's completion request (cobra's hidden
// __complete command, what the scripts of `wtrace completion` call) and
// returns the candidates (descriptions cut) and the directive line.
func complete(t *testing.T, args ...string) ([]string, string) {
	t.Helper()
	stdout, stderr, code := wtrace(t, append([]string{cobra.ShellCompRequestCmd}, args...)...)
	if code != 0 {
		t.Fatalf("__complete %q: exit %d: %s", args, code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	var out []string
	for _, l := range lines[:len(lines)-1] {
		out = append(out, strings.SplitN(l, "\t", 2)[0])
	}
	return out, lines[len(lines)-1]
}

// TestCompletion: every flag of a fixed set of values completes its
// values (a list after its comma, without the words already given), the
// arguments that are sessions complete *.wt files, --context the
// kubeconfig's contexts.
func TestCompletion(t *testing.T) {
	for _, fv := range flagValues {
		cmds := []string{fv.cmd}
		if fv.cmd == "" {
			cmds = []string{"record", "replay"}
		}
		for _, cmd := range cmds {
			got, dir := complete(t, append(strings.Fields(cmd), "--"+fv.flag, "")...)
			if !slices.Equal(got, fv.values) || dir != ":4" { // ShellCompDirectiveNoFileComp
				t.Errorf("%s --%s: %q %s; want %q :4", cmd, fv.flag, got, dir, fv.values)
			}
		}
	}
	if got, _ := complete(t, "replay", "--writes", "re"); !slices.Equal(got, []string{"reject", "recorded"}) {
		t.Errorf("replay --writes re: %q", got)
	}
	if got, _ := complete(t, "diff", "a.wt", "b.wt", "--only", "write,e"); !slices.Equal(got, []string{"write,event", "write,exchange"}) {
		t.Errorf("diff --only write,e: %q", got)
	}
	for _, cmd := range sessionArgs {
		if got, dir := complete(t, append(strings.Fields(cmd), "")...); !slices.Equal(got, []string{"wt"}) || dir != ":8" { // ShellCompDirectiveFilterFileExt
			t.Errorf("%s SESSION: %q %s; want the .wt filter", cmd, got, dir)
		}
	}
	if got, dir := complete(t, "record", "--pcap", ""); !slices.Contains(got, "pcapng") || dir != ":8" {
		t.Errorf("record --pcap: %q %s", got, dir)
	}

	kc := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := map[string]any{"apiVersion": "v1", "kind": "Config",
		"clusters": []any{map[string]any{"name": "c", "cluster": map[string]any{"server": "https://127.0.0.1:6443"}}},
		"contexts": []any{
			map[string]any{"name": "prod", "context": map[string]any{"cluster": "c"}},
			map[string]any{"name": "dev", "context": map[string]any{"cluster": "c"}},
			map[string]any{"name": "dev-2", "context": map[string]any{"cluster": "c"}},
		}}
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(kc, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if got, _ := complete(t, "record", "--proxy", "--kubeconfig", kc, "--context", ""); !slices.Equal(got, []string{"dev", "dev-2", "prod"}) {
		t.Errorf("record --context: %q; want the kubeconfig's contexts", got)
	}
	if got, _ := complete(t, "record", "--proxy", "--kubeconfig", kc, "--context", "d"); !slices.Equal(got, []string{"dev", "dev-2"}) {
		t.Errorf("record --context d: %q", got)
	}
	if stdout, _, code := wtrace(t, "completion", "bash"); code != 0 || !strings.Contains(stdout, "__wtrace_") {
		t.Errorf("completion bash: exit %d", code)
	}
}

// TestShortFlags: a short flag means one thing in every command (-o the
// output file, -v --verbose): none is two long flags.
func TestShortFlags(t *testing.T) {
	root := newRootCmd(streams{})
	seen := map[string]string{} // shorthand → long name
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.InitDefaultHelpFlag()
		c.InitDefaultVersionFlag()
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if f.Shorthand == "" {
				return
			}
			if long, ok := seen[f.Shorthand]; ok && long != f.Name {
				t.Errorf("-%s is --%s in %s and --%s elsewhere", f.Shorthand, f.Name, c.CommandPath(), long)
			}
			seen[f.Shorthand] = f.Name
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	if seen["v"] != "verbose" || seen["o"] != "out" {
		t.Errorf("short flags %v; want -v --verbose, -o --out", seen)
	}
	if stdout, _, code := wtrace(t, "--version"); code != 0 || !strings.HasPrefix(stdout, "wtrace version ") {
		t.Errorf("--version: exit %d %q", code, stdout)
	}
	if _, _, code := wtrace(t, "-v"); code != 2 {
		t.Errorf("wtrace -v: exit %d; want 2 (no such short flag at the root)", code)
	}
}

// TestVersion: text, and --output json with the documented fields.
func TestVersion(t *testing.T) {
	stdout, _, code := wtrace(t, "version")
	if code != 0 || !strings.HasPrefix(stdout, "wtrace ") || !strings.Contains(stdout, "session format  3") {
		t.Errorf("version: exit %d\n%s", code, stdout)
	}
	stdout, _, code = wtrace(t, "version", "--output", "json")
	var v map[string]any
	if err := json.Unmarshal([]byte(stdout), &v); code != 0 || err != nil {
		t.Fatalf("version --output json: exit %d, %v\n%s", code, err, stdout)
	}
	for _, k := range []string{"version", "goVersion", "platform", "sessionFormat"} {
		if v[k] == nil {
			t.Errorf("version --output json lacks %q: %v", k, v)
		}
	}
}
