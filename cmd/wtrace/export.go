package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/wtrace/wtrace/export"
)

type exportOptions struct {
	s      streams
	path   string
	format string
	out    string
	data   bool
}

func newExportCmd(s streams, runF func(*exportOptions) error) *cobra.Command {
	o := &exportOptions{s: s}
	c := &cobra.Command{
		Use:   "export --format " + strings.Join(export.FormatNames(), "|") + " SESSION.wt [-o FILE]",
		Short: "Write a session as JSON lines, a HAR log or a pcap file",
		Long: `Export writes a session in a format other tools read, streaming (memory does
not grow with the session):

` + formatHelp() + `
Secrets stay as the session holds them: redacted headers are empty, redacted
values are the placeholders the session stores; a session recorded with
--keep-secrets holds Secret values, and so does its export (a warning says
so, and the HAR's comment). With -o the output goes to a file — never over
the session, and only once complete — else to stdout (pcap only when stdout
is not a terminal).`,
		Example: `  wtrace export --format jsonl session.wt | jq 'select(.record=="exchange") | .request.target'
  wtrace export --format har session.wt -o session.har
  wtrace export --format pcap session.wt -o session.pcap && tshark -r session.pcap -d tcp.port==8001,http -Y http`,
		Args: exactArgs(1, "one session file"),
		RunE: func(c *cobra.Command, args []string) error {
			o.path, o.format = args[0], strings.ToLower(o.format)
			ef, ok := export.FormatNamed(o.format)
			switch {
			case o.format == "":
				return &usageError{fmt.Errorf("--format is required: %s\nSee 'wtrace export --help'.", formatList())}
			case !ok:
				return &usageError{fmt.Errorf("unknown --format %q: use %s\nSee 'wtrace export --help'.", o.format, formatList())}
			case o.data && !ef.Data:
				return &usageError{fmt.Errorf("--data applies to --format %s only", dataFormats())}
			}
			if runF != nil {
				return runF(o)
			}
			return runExport(o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.format, "format", "", "output `format`: "+formatList()+" (required)")
	f.StringVarP(&o.out, "out", "o", "-", "output `file`; - for stdout")
	f.BoolVar(&o.data, "data", false, "jsonl: include the events' bytes and the pieces of other bodies")
	return c
}

func runExport(o *exportOptions) error {
	ef, ok := export.FormatNamed(o.format)
	if !ok {
		return &usageError{fmt.Errorf("unknown --format %q: use %s", o.format, formatList())}
	}
	if ef.Binary && o.out == "-" && isTerminal(o.s.out) {
		return withHint(fmt.Errorf("a %s file is binary: not written to a terminal", ef.Name), "wtrace export --format %s %s -o session.%s", ef.Name, o.path, ef.Name)
	}
	if err := noOverwrite([]string{o.out}, o.path); err != nil {
		return err
	}
	f, err := openSession(o.path)
	if err != nil {
		return err
	}
	defer f.Close()
	if export.KeepsSecrets(f) {
		fmt.Fprintf(o.s.err, "Warning: %s was recorded with --keep-secrets: its Secret values and tokens are in the export as captured; treat the export as a secret.\n", o.path)
	}
	w, commit, abort, err := createOutput(o.s, o.out, "-o")
	if err != nil {
		return err
	}
	defer abort()
	res, err := ef.Write(w, f, export.Options{Data: o.data, Version: toolVersion()})
	if err == nil {
		err = commit()
	}
	if err != nil {
		return fmt.Errorf("export %s: %w", o.path, err)
	}
	notes(o.s, res.Notes)
	return reportDamage(o.s, o.path, f, res.Damage)
}

// formatHelp describes export.Formats for the command's help, a format
// a paragraph.
func formatHelp() string {
	var b strings.Builder
	for _, f := range export.Formats {
		for i, line := range strings.Split(f.Help, "\n") {
			if i == 0 {
				fmt.Fprintf(&b, "  %-6s %s\n", f.Name, line)
			} else {
				fmt.Fprintf(&b, "         %s\n", line)
			}
		}
	}
	return b.String()
}

// formatList names export.Formats in a phrase: "jsonl, har or pcap".
func formatList() string { return orList(export.FormatNames()) }

// dataFormats names the formats that take --data.
func dataFormats() string {
	var names []string
	for _, f := range export.Formats {
		if f.Data {
			names = append(names, f.Name)
		}
	}
	return orList(names)
}

// orList joins words as "a, b or c".
func orList(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}
