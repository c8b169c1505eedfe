package main

import (
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/wtrace/wtrace/diff"
	"github.com/wtrace/wtrace/export"
	"github.com/wtrace/wtrace/replay"
)

// Shell completion (cobra's `wtrace completion bash|zsh|fish|powershell`):
// the values of flags that take one of a few words, the contexts of the
// kubeconfig, and session files for the arguments that are sessions. It
// is the one place that knows them; a new flag of a fixed set of values
// gets its line here (TestCompletion checks the list).

// sessionExts are the extensions of session files, for the shells' file
// filters.
var sessionExts = []string{"wt"}

// sessionArgs are the commands whose positional arguments are session
// files.
var sessionArgs = []string{"inspect", "events", "verify", "replay", "diff", "export", "merge", "slice", "report", "push", "perturb plan", "perturb run"}

// flagValues are the flags that take one of a fixed set of words, per
// command ("" for every command that has the flag). A value list of a
// slice flag (--only write,event) completes after its last comma.
var flagValues = []struct {
	cmd, flag string
	values    []string
}{
	{"replay", "writes", []string{string(replay.WritesAnswer), string(replay.WritesReject), string(replay.WritesRecorded), string(replay.WritesApply)}},
	{"replay", "pace", []string{string(replay.PaceRecorded), string(replay.PaceQuiet)}},
	{"export", "format", export.FormatNames()},
	{"diff", "only", categories()},
	{"diff", "verdict", categories()},
	{"diff", "ignore-verb", []string{"POST", "PUT", "PATCH", "DELETE"}},
	{"events", "type", []string{"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"}},
	{"", "log-format", logFormats},
	{"record", "compression", compressionNames()},
	{"version", "output", []string{"json"}},
	{"perturb plan", "kind", perturbKinds()},
	{"perturb plan", "output", []string{"text", "json"}},
	{"perturb run", "kind", perturbKinds()},
	{"perturb run", "output", []string{"text", "json"}},
}

func categories() []string {
	var out []string
	for _, c := range diff.AllCategories {
		out = append(out, string(c))
	}
	return out
}

func compressionNames() []string {
	var out []string
	for n := range compressionLevels {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// registerCompletions adds the completions to the commands of root (and
// their subcommands: "perturb plan" is named by its path below root).
func registerCompletions(root *cobra.Command) {
	var cmds []*cobra.Command
	for _, c := range root.Commands() {
		cmds = append(cmds, c)
		cmds = append(cmds, c.Commands()...)
	}
	for _, c := range cmds {
		name := strings.TrimPrefix(c.CommandPath(), root.Name()+" ")
		for _, fv := range flagValues {
			if (fv.cmd == "" || fv.cmd == name) && c.Flags().Lookup(fv.flag) != nil {
				c.RegisterFlagCompletionFunc(fv.flag, completeWords(fv.values))
			}
		}
		if slices.Contains(sessionArgs, name) {
			c.ValidArgsFunction = completeSessions
		}
		if name == "record" {
			c.RegisterFlagCompletionFunc("context", completeContexts)
			c.RegisterFlagCompletionFunc("pcap", cobra.FixedCompletions([]string{"pcap", "pcapng", "gz", "zst"}, cobra.ShellCompDirectiveFilterFileExt))
		}
	}
}

// completeSessions completes session files (*.wt) and directories.
func completeSessions(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
	return sessionExts, cobra.ShellCompDirectiveFilterFileExt
}

// completeWords completes one of words, or, after a comma, the next of a
// comma-separated list (without the words already in it).
func completeWords(words []string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		prefix, last := "", toComplete
		if i := strings.LastIndexByte(toComplete, ','); i >= 0 {
			prefix, last = toComplete[:i+1], toComplete[i+1:]
		}
		have := map[string]bool{}
		for _, w := range strings.Split(prefix, ",") {
			have[w] = true
		}
		var out []string
		for _, w := range words {
			if !have[w] && strings.HasPrefix(strings.ToLower(w), strings.ToLower(last)) {
				out = append(out, prefix+w)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeContexts completes the contexts of the kubeconfig that
// --kubeconfig names (or $KUBECONFIG, ~/.kube/config), as kubectl's
// --context completes.
func completeContexts(c *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if f := c.Flags().Lookup("kubeconfig"); f != nil && f.Value.String() != "" {
		rules.ExplicitPath = f.Value.String()
	}
	cfg, err := rules.Load()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError | cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for name := range cfg.Contexts {
		if strings.HasPrefix(name, toComplete) {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, cobra.ShellCompDirectiveNoFileComp
}
