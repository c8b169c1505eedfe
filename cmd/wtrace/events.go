package main

import (
	"bufio"

	"github.com/spf13/cobra"

	"github.com/wtrace/wtrace/formats"
)

type eventsOptions struct {
	s          streams
	path       string
	types      []string
	kinds      []string
	namespaces []string
	names      []string
	data       bool
}

func newEventsCmd(s streams, runF func(*eventsOptions) error) *cobra.Command {
	o := &eventsOptions{s: s}
	c := &cobra.Command{Use: "events SESSION.wt",
		Short: "Print every watch event of a session as one JSON object per line",
		Long: `Events prints the watch events of a session in session order, one JSON object
per line on stdout:

  conn       client→server addresses of the connection ("10.0.0.5:41234->10.0.0.1:6443")
  exchange   exchange number in the session (from 0)
  request    method and request-target as sent (absent when not captured)
  seq        event number within the exchange (from 0)
  time       capture time of the packet that completed the event (RFC 3339, UTC)
  type, apiVersion, kind, namespace, name, resourceVersion
             from the event (absent when the event has none); a Table (kubectl
             get -w) keeps kind "Table" and has its row's object's namespace,
             name and resourceVersion
  code, reason, message
             for ERROR events carrying a Status
  size, sha256
             length and SHA-256 of the event's exact bytes (JSON: the object text;
             protobuf: the frame payload without its length prefix; CBOR: the
             data item without its self-described tag d9d9f7, as client-go reads it)
  format     "json", "protobuf" or "cbor"

Filters combine with AND; a filter given several times (or with commas)
matches any of its values.`,
		Example: `  wtrace events session.wt | jq .
  wtrace events session.wt --type ERROR
  wtrace events session.wt --kind ConfigMap --namespace demo --type ADDED,MODIFIED
  wtrace events session.wt --data | jq .event.object.metadata.name`,
		Args: exactArgs(1, "one session file"),
		RunE: func(c *cobra.Command, args []string) error {
			o.path = args[0]
			if runF != nil {
				return runF(o)
			}
			return runEvents(o)
		},
	}
	f := c.Flags()
	f.StringSliceVar(&o.types, "type", nil, "only events of these `types` (ADDED, MODIFIED, DELETED, BOOKMARK, ERROR)")
	f.StringSliceVar(&o.kinds, "kind", nil, "only objects of these `kinds`")
	f.StringSliceVar(&o.namespaces, "namespace", nil, "only objects in these `namespaces`")
	f.StringSliceVar(&o.names, "name", nil, "only objects with these `names`")
	f.BoolVar(&o.data, "data", false, "include the event itself: \"event\" (JSON events) or \"event_base64\" (protobuf, CBOR)")
	return c
}

func runEvents(o *eventsOptions) error {
	f, err := openSession(o.path)
	if err != nil {
		return err
	}
	defer f.Close()
	filter := formats.EventFilter{Types: o.types, Kinds: o.kinds, Namespaces: o.namespaces, Names: o.names}
	out := bufio.NewWriterSize(o.s.out, 64<<10)
	enc := formats.NewEventEncoder(out, o.data)
	var damage []error
	for r, err := range f.Records().Intact(func(d *formats.DamageError) { damage = append(damage, d) }) {
		if err != nil {
			out.Flush()
			return err
		}
		fr, ok := r.(*formats.Frame)
		if !ok {
			continue
		}
		if ev := f.Event(fr); filter.Match(ev.Meta) {
			if err := enc.Encode(ev); err != nil {
				return err
			}
		}
	}
	if err := out.Flush(); err != nil {
		return err
	}
	return reportDamage(o.s, o.path, f, damage)
}
