package main

import (
	"bufio"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/wtrace/wtrace/formats"
)

type eventsOptions struct {
	types      []string
	kinds      []string
	namespaces []string
	names      []string
	data       bool
}

func newEventsCmd(s streams) *cobra.Command {
	o := &eventsOptions{}
	c := &cobra.Command{
		Use:   "events SESSION.wt",
		Short: "Print every watch event of a session as one JSON object per line",
		Long: `Events prints the watch events of a session in session order, one JSON object
per line on stdout:

  conn       client→server addresses of the connection ("10.0.0.5:41234->10.0.0.1:6443")
  exchange   exchange number in the session (from 0)
  request    method and request-target as sent (absent when not captured)
  seq        event number within the exchange (from 0)
  time       capture time of the packet that completed the event (RFC 3339, UTC)
  type, apiVersion, kind, namespace, name, resourceVersion
             from the event (absent when the event has none)
  code, reason, message
             for ERROR events carrying a Status
  size, sha256
             length and SHA-256 of the event's exact bytes (JSON: the object text;
             protobuf: the frame payload without its length prefix)
  format     "json" or "protobuf"

Filters combine with AND; a filter given several times (or with commas)
matches any of its values.`,
		Example: `  wtrace events session.wt | jq .
  wtrace events session.wt --type ERROR
  wtrace events session.wt --kind ConfigMap --namespace demo --type ADDED,MODIFIED
  wtrace events session.wt --data | jq .event.object.metadata.name`,
		Args: exactArgs(1, "one session file"),
		RunE: func(c *cobra.Command, args []string) error {
			return runEvents(s, args[0], o)
		},
	}
	f := c.Flags()
	f.StringSliceVar(&o.types, "type", nil, "only events of these `types` (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR)")
	f.StringSliceVar(&o.kinds, "kind", nil, "only objects of these `kinds`")
	f.StringSliceVar(&o.namespaces, "namespace", nil, "only objects in these `namespaces`")
	f.StringSliceVar(&o.names, "name", nil, "only objects with these `names`")
	f.BoolVar(&o.data, "data", false, "include the event itself: \"event\" (JSON events) or \"event_base64\" (protobuf)")
	return c
}

func runEvents(s streams, path string, o *eventsOptions) error {
	f, err := openSession(path)
	if err != nil {
		return err
	}
	defer f.Close()
	filter := formats.EventFilter{Types: o.types, Kinds: o.kinds, Namespaces: o.namespaces, Names: o.names}
	out := bufio.NewWriterSize(s.out, 64<<10)
	enc := formats.NewEventEncoder(out, o.data)
	var damage []error
	for ev, err := range f.Events() {
		var de *formats.DamageError
		if errors.As(err, &de) {
			damage = append(damage, err)
			continue
		}
		if err != nil {
			out.Flush()
			return err
		}
		if !filter.Match(ev.Meta) {
			continue
		}
		if err := enc.Encode(ev); err != nil {
			return err
		}
	}
	if err := out.Flush(); err != nil {
		return err
	}
	return reportDamage(s, path, f, damage)
}

// openSession opens a session file with a helpful error.
func openSession(path string) (*formats.File, error) {
	f, err := formats.Open(path, formats.ReaderOptions{})
	if err != nil {
		if errors.Is(err, formats.ErrNotSession) {
			return nil, withHint(fmt.Errorf("%s is not a wtrace session file", path),
				"make one with: wtrace record --pcap capture.pcap -o %s", path)
		}
		return nil, withHint(err, "check the path, or run: wtrace verify %s", path)
	}
	return f, nil
}

// reportDamage prints what a damaged or unclosed file lost, after the data
// it could read. It fails the command if blocks were damaged.
func reportDamage(s streams, path string, f *formats.File, damage []error) error {
	var probs []error
	for _, p := range f.Problems() {
		var de *formats.DamageError
		if !errors.As(p, &de) { // damage is reported by the scan, in order
			probs = append(probs, p)
		}
	}
	if len(probs) == 0 && len(damage) == 0 {
		return nil
	}
	seen := map[string]bool{}
	for _, e := range append(probs, damage...) {
		if !seen[e.Error()] {
			seen[e.Error()] = true
			fmt.Fprintf(s.err, "Warning: %s: %v\n", path, e)
		}
	}
	if len(damage) > 0 {
		return withHint(fmt.Errorf("%s is damaged: %d region(s) could not be read; everything else was printed", path, len(damage)),
			"wtrace verify --repair %s.repaired.wt %s", strings.TrimSuffix(path, ".wt"), path)
	}
	return nil
}
