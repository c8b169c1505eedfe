package export

import (
	"io"
	"strings"

	"github.com/wtrace/wtrace/formats"
)

// Options configure an export through the table of Formats: what one
// format does not take is ignored.
type Options struct {
	// Data is JSONLOptions.Data (jsonl only: a Format's Data says so).
	Data bool
	// Version is HAROptions.Version (har).
	Version string
}

// A Format is one format `wtrace export` writes a session in.
type Format struct {
	// Name is how --format spells it.
	Name string
	// Help says what the format holds, for the command's help: lines of
	// at most 66 columns, the first what the format is.
	Help string
	// Binary formats are not written to a terminal.
	Binary bool
	// Data tells whether the format takes Options.Data.
	Data bool
	// Write exports the session f to w in this format.
	Write func(w io.Writer, f *formats.File, opts Options) (Result, error)
}

// Formats are the formats `wtrace export` writes, in the order its help
// lists them.
var Formats = []Format{
	{
		Name: "jsonl",
		Help: `one JSON object per line, in session order: the session's meta,
each connection and exchange where it begins (with everything the
session says of it), each watch event (the line of 'wtrace events',
with "record":"event"), each anomaly, the summary last. --data adds
the events' bytes and the pieces of other bodies. The schema is
documented in docs/SCHEMA.md and stable.`,
		Data: true,
		Write: func(w io.Writer, f *formats.File, opts Options) (Result, error) {
			return JSONL(w, f, JSONLOptions{Data: opts.Data})
		},
	},
	{
		Name: "har",
		Help: `a HAR 1.2 log: one entry per exchange with its headers, body (a
watch body as recorded) and timings, for browsers' and proxies' tools.`,
		Write: func(w io.Writer, f *formats.File, opts Options) (Result, error) {
			return HAR(w, f, HAROptions{Version: opts.Version})
		},
	},
	{
		Name: "pcap",
		Help: `synthesized Ethernet/IP/TCP packets per connection at the recorded
times, for Wireshark and tshark; HTTP/2 is written as h2c (cleartext)
and TLS as the plaintext the session holds. Wireshark dissects ports
other than 80/8080 as HTTP after "Decode As" (tshark -d
tcp.port==6443,http, or http2).`,
		Binary: true,
		Write: func(w io.Writer, f *formats.File, _ Options) (Result, error) {
			return Pcap(w, f, PcapOptions{})
		},
	},
}

// FormatNamed returns the format spelled name (in any case), and whether
// there is one.
func FormatNamed(name string) (Format, bool) {
	for _, f := range Formats {
		if strings.EqualFold(f.Name, name) {
			return f, true
		}
	}
	return Format{}, false
}

// FormatNames are the names of Formats, in order.
func FormatNames() []string {
	names := make([]string, len(Formats))
	for i, f := range Formats {
		names[i] = f.Name
	}
	return names
}
