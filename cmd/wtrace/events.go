package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/wtrace/wtrace/formats"
	"github.com/wtrace/wtrace/frame"
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

// eventLine is one line of `wtrace events`. Field names are a stable
// interface (DESIGN.md): add fields, never rename them.
type eventLine struct {
	Conn            string          `json:"conn"`
	Exchange        int64           `json:"exchange"`
	Request         string          `json:"request,omitempty"`
	Seq             int64           `json:"seq"`
	Time            string          `json:"time"`
	Type            string          `json:"type,omitempty"`
	APIVersion      string          `json:"apiVersion,omitempty"`
	Kind            string          `json:"kind,omitempty"`
	Namespace       string          `json:"namespace,omitempty"`
	Name            string          `json:"name,omitempty"`
	ResourceVersion string          `json:"resourceVersion,omitempty"`
	Code            int32           `json:"code,omitempty"`
	Reason          string          `json:"reason,omitempty"`
	Message         string          `json:"message,omitempty"`
	Size            int             `json:"size"`
	SHA256          string          `json:"sha256"`
	Format          string          `json:"format"`
	Redacted        int             `json:"redacted,omitempty"`
	Event           json.RawMessage `json:"event,omitempty"`
	EventBase64     string          `json:"event_base64,omitempty"`
}

func matchAny(filter []string, v string) bool {
	if len(filter) == 0 {
		return true
	}
	for _, f := range filter {
		if strings.EqualFold(f, v) {
			return true
		}
	}
	return false
}

func runEvents(s streams, path string, o *eventsOptions) error {
	f, err := openSession(path)
	if err != nil {
		return err
	}
	defer f.Close()
	idx := f.Index()
	conns := connNames(idx)
	out := bufio.NewWriterSize(s.out, 64<<10)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	var damage []error
	for r, err := range f.Records().All() {
		var de *formats.DamageError
		if errors.As(err, &de) {
			damage = append(damage, err)
			continue
		}
		if err != nil {
			out.Flush()
			return err
		}
		fr, ok := r.(*formats.Frame)
		if !ok {
			continue
		}
		x := exchangeInfo(idx, fr.Exchange)
		format := frame.Unknown
		if x != nil && x.Response != nil {
			format = x.Response.Events
		}
		m, _ := frame.Peek(format, fr.Data)
		if !matchAny(o.types, m.Type) || !matchAny(o.kinds, m.Kind) || !matchAny(o.namespaces, m.Namespace) || !matchAny(o.names, m.Name) {
			continue
		}
		sum := sha256.Sum256(fr.Data)
		line := eventLine{
			Exchange: fr.Exchange, Seq: fr.Seq,
			Time:            time.Unix(0, fr.Time).UTC().Format(timeFormat),
			Type:            m.Type,
			APIVersion:      m.APIVersion,
			Kind:            m.Kind,
			Namespace:       m.Namespace,
			Name:            m.Name,
			ResourceVersion: m.ResourceVersion,
			Code:            m.Code,
			Reason:          m.Reason,
			Message:         m.Message,
			Size:            len(fr.Data),
			SHA256:          hex.EncodeToString(sum[:]),
			Format:          format.String(),
			Redacted:        len(fr.Redacted),
		}
		if x != nil {
			line.Conn = conns[x.Request.Conn]
			if !x.Request.Missing {
				line.Request = x.Request.Method + " " + x.Request.Target
			}
		}
		if o.data {
			if format == frame.JSON && json.Valid(fr.Data) {
				line.Event = fr.Data
			} else {
				line.EventBase64 = base64.StdEncoding.EncodeToString(fr.Data)
			}
		}
		if err := enc.Encode(&line); err != nil {
			return err
		}
	}
	if err := out.Flush(); err != nil {
		return err
	}
	return reportDamage(s, path, f, damage)
}

// connNames maps connection IDs to "client->server".
func connNames(idx *formats.Index) map[uint64]string {
	m := make(map[uint64]string, len(idx.Conns))
	for _, c := range idx.Conns {
		m[c.Conn.ID] = c.Conn.Client + "->" + c.Conn.Server
	}
	return m
}

func exchangeInfo(idx *formats.Index, id int64) *formats.ExchangeInfo {
	if id >= 0 && id < int64(len(idx.Exchanges)) && idx.Exchanges[id].Request.Exchange == id {
		return &idx.Exchanges[id]
	}
	for i := range idx.Exchanges {
		if idx.Exchanges[i].Request.Exchange == id {
			return &idx.Exchanges[i]
		}
	}
	return nil
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

// timeFormat is RFC 3339 with all nine digits of nanoseconds, so times sort
// as strings.
const timeFormat = "2006-01-02T15:04:05.000000000Z07:00"
