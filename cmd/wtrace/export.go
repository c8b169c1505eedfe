package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/wtrace/wtrace/export"
)

type exportOptions struct {
	format string
	out    string
	data   bool
}

func newExportCmd(s streams) *cobra.Command {
	o := &exportOptions{}
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
values are the placeholders the session stores. With -o the output goes to a
file, else to stdout (pcap only when stdout is not a terminal).`,
		Example: `  wtrace export --format jsonl session.wt | jq 'select(.record=="exchange") | .request.target'
  wtrace export --format har session.wt -o session.har
  wtrace export --format pcap session.wt -o session.pcap && tshark -r session.pcap -d tcp.port==8001,http -Y http`,
		Args: exactArgs(1, "one session file"),
		RunE: func(c *cobra.Command, args []string) error {
			return runExport(s, args[0], o)
		},
	}
	f := c.Flags()
	f.StringVar(&o.format, "format", "", "output `format`: jsonl, har or pcap (required)")
	f.StringVarP(&o.out, "out", "o", "-", "output `file`; - for stdout")
	f.BoolVar(&o.data, "data", false, "jsonl: include the events' bytes and the pieces of other bodies")
	return c
}

func runExport(s streams, path string, o *exportOptions) error {
	format := strings.ToLower(o.format)
	switch format {
	case "jsonl", "har", "pcap":
	case "":
		return &usageError{errors.New("--format is required: jsonl, har or pcap\nSee 'wtrace export --help'.")}
	default:
		return &usageError{fmt.Errorf("unknown --format %q: use jsonl, har or pcap\nSee 'wtrace export --help'.", o.format)}
	}
	if o.data && format != "jsonl" {
		return &usageError{errors.New("--data applies to --format jsonl only")}
	}
	if format == "pcap" && o.out == "-" && isTerminal(s.out) {
		return withHint(errors.New("a pcap file is binary: not written to a terminal"), "wtrace export --format pcap %s -o session.pcap", path)
	}
	f, err := openSession(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var w io.Writer = s.out
	var file *os.File
	if o.out != "-" {
		file, err = os.Create(o.out)
		if err != nil {
			return withHint(err, "check that the directory of -o exists and is writable")
		}
		w = file
	}
	var res export.Result
	switch format {
	case "jsonl":
		res, err = export.JSONL(w, f, export.JSONLOptions{Data: o.data})
	case "har":
		res, err = export.HAR(w, f, export.HAROptions{Version: toolVersion()})
	case "pcap":
		res, err = export.Pcap(w, f, export.PcapOptions{})
	}
	if file != nil {
		if cerr := file.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(o.out)
		}
	}
	if err != nil {
		return fmt.Errorf("export %s: %w", path, err)
	}
	for _, n := range res.Notes {
		fmt.Fprintf(s.err, "Note: %s\n", n)
	}
	return reportDamage(s, path, f, res.Damage)
}
