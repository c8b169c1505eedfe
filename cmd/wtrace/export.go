package main

import (
	"errors"
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
		Use:   "export --format jsonl|har|pcap SESSION.wt [-o FILE]",
		Short: "Write a session as JSON lines, a HAR log or a pcap file",
		Long: `Export writes a session in a format other tools read, streaming (memory does
not grow with the session):

  jsonl  one JSON object per line, in session order: the session's meta,
         each connection and exchange where it begins (with everything the
         session says of it), each watch event (the line of 'wtrace events',
         with "record":"event"), each anomaly, the summary last. --data adds
         the events' bytes and the pieces of other bodies. The schema is
         documented in docs/SCHEMA.md and stable.
  har    a HAR 1.2 log: one entry per exchange with its headers, body (a
         watch body as recorded) and timings, for browsers' and proxies' tools.
  pcap   synthesized Ethernet/IP/TCP packets per connection at the recorded
         times, for Wireshark and tshark; HTTP/2 is written as h2c (cleartext)
         and TLS as the plaintext the session holds. Wireshark dissects ports
         other than 80/8080 as HTTP after "Decode As" (tshark -d
         tcp.port==6443,http, or http2).

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
			switch o.format {
			case "jsonl", "har", "pcap":
			case "":
				return &usageError{errors.New("--format is required: jsonl, har or pcap\nSee 'wtrace export --help'.")}
			default:
				return &usageError{fmt.Errorf("unknown --format %q: use jsonl, har or pcap\nSee 'wtrace export --help'.", o.format)}
			}
			if o.data && o.format != "jsonl" {
				return &usageError{errors.New("--data applies to --format jsonl only")}
			}
			if runF != nil {
				return runF(o)
			}
			return runExport(o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.format, "format", "", "output `format`: jsonl, har or pcap (required)")
	f.StringVarP(&o.out, "out", "o", "-", "output `file`; - for stdout")
	f.BoolVar(&o.data, "data", false, "jsonl: include the events' bytes and the pieces of other bodies")
	return c
}

func runExport(o *exportOptions) error {
	if o.format == "pcap" && o.out == "-" && isTerminal(o.s.out) {
		return withHint(errors.New("a pcap file is binary: not written to a terminal"), "wtrace export --format pcap %s -o session.pcap", o.path)
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
	var res export.Result
	switch o.format {
	case "jsonl":
		res, err = export.JSONL(w, f, export.JSONLOptions{Data: o.data})
	case "har":
		res, err = export.HAR(w, f, export.HAROptions{Version: toolVersion()})
	case "pcap":
		res, err = export.Pcap(w, f, export.PcapOptions{})
	}
	if err == nil {
		err = commit()
	}
	if err != nil {
		return fmt.Errorf("export %s: %w", o.path, err)
	}
	notes(o.s, res.Notes)
	return reportDamage(o.s, o.path, f, res.Damage)
}
