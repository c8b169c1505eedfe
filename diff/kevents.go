package diff

import (
	"encoding/json"
	"strconv"
)

// Kubernetes Events. A controller's Events (core/v1 and events.k8s.io/v1)
// are named after the object they are about and the time they were made
// ("web.18ebe7f5bced6957"), and a recorder that sees the same Event again
// PATCHes its count instead of creating another: neither their names nor
// their sequence of writes is the controller's behaviour. diff compares
// an Event by what it says — its type, reason, the object it is about
// (kind, namespace, name), its message (note), the component that reported
// it — with generated names in it read as their canonical names (see
// names.go), and by how many times it happened (count, or series.count):
// the Object of its writes is that identity (Object.Event), not its name.

// kevent is what diff reads of an Event write's body.
type kevent struct {
	name     string // metadata.name (as sent)
	identity string // type, reason, object, message, component; "" if the body is not an Event
	count    int64
	hasCount bool
	lease    bool // about a Lease (leader election's Events)
}

// isEventResource reports whether a resource path names Events: core/v1
// events or events.k8s.io events.
func isEventResource(o Object) bool {
	return o.Resource == "events" && (o.Group == "" || o.Group == "events.k8s.io")
}

// parseKEvent reads an Event (a create or update's body, JSON), or the
// count of a patch of one, with generated names read through n.
func parseKEvent(doc []byte, n *names) kevent {
	var v struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Involved   *eventObj `json:"involvedObject"`
		Regarding  *eventObj `json:"regarding"`
		Reason     string    `json:"reason"`
		Message    string    `json:"message"`
		Note       string    `json:"note"`
		Type       string    `json:"type"`
		Count      *int64    `json:"count"`
		Deprecated *int64    `json:"deprecatedCount"`
		Series     *struct {
			Count *int64 `json:"count"`
		} `json:"series"`
		Source struct {
			Component string `json:"component"`
		} `json:"source"`
		ReportingComponent  string `json:"reportingComponent"`
		ReportingController string `json:"reportingController"`
	}
	if json.Unmarshal(doc, &v) != nil {
		return kevent{}
	}
	k := kevent{name: v.Metadata.Name}
	switch {
	case v.Series != nil && v.Series.Count != nil:
		k.count, k.hasCount = *v.Series.Count, true
	case v.Count != nil:
		k.count, k.hasCount = *v.Count, true
	case v.Deprecated != nil:
		k.count, k.hasCount = *v.Deprecated, true
	}
	about, msg := v.Involved, v.Message
	if about == nil {
		about, msg = v.Regarding, v.Note
	}
	if about == nil || v.Reason == "" {
		return k // a patch of one, or not an Event
	}
	k.lease = about.Kind == "Lease"
	comp := v.Source.Component
	if comp == "" {
		comp = v.ReportingController
	}
	if comp == "" {
		comp = v.ReportingComponent
	}
	obj := about.Kind + " " + n.canonString(about.Name)
	if about.Namespace != "" {
		obj = about.Kind + " " + about.Namespace + "/" + n.canonString(about.Name)
	}
	k.identity = v.Type + " " + v.Reason + " " + obj + ": " + n.canonString(msg)
	if comp != "" {
		k.identity += " (" + comp + ")"
	}
	if !k.hasCount {
		k.count = 1
	}
	return k
}

type eventObj struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// countText is how a report says an Event's count.
func countText(n int64) string {
	if n == 1 {
		return "once"
	}
	return strconv.FormatInt(n, 10) + " times"
}
