package conformance

import (
	"encoding/json"
	"fmt"
	"net"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/wtrace/wtrace/apiserver/codec"
	"github.com/wtrace/wtrace/frame"
)

// view is one server's side of a group of cases: the names it gave the
// uids and resourceVersions its answers showed, in order of appearance
// (two servers agree when they show the same ones in the same places),
// and what the next cases' placeholders stand for.
type view struct {
	uids, rvs map[string]string
	lastRV    map[string]string // object name → its last resourceVersion
	lastUID   map[string]string
	lastObj   map[string]string // object name → its last JSON
	marks     map[string]string // list mark → its resourceVersion
	cont      string            // the last list's continue token
	token     string            // the last token a TokenRequest got
	counts    map[string]int    // names given per object (nameMeta)
}

func newView() *view {
	return &view{uids: map[string]string{}, rvs: map[string]string{}, lastRV: map[string]string{},
		lastUID: map[string]string{}, lastObj: map[string]string{}, marks: map[string]string{}}
}

var placeholder = regexp.MustCompile(`\$(RV|UID|OBJ|MARK)\(([^)]*)\)|\$CONTINUE|\$TOKEN`)

// fill replaces a case's placeholders with what they stand for on this
// side (see Case.Body); inQuery escapes them for a query.
func (v *view) fill(s string, inQuery bool) string {
	return placeholder.ReplaceAllStringFunc(s, func(m string) string {
		switch m {
		case "$CONTINUE":
			return escape(v.cont, inQuery)
		case "$TOKEN":
			return v.token
		}
		sm := placeholder.FindStringSubmatch(m)
		switch sm[1] {
		case "RV":
			return v.lastRV[sm[2]]
		case "UID":
			return v.lastUID[sm[2]]
		case "OBJ":
			return v.lastObj[sm[2]]
		}
		return escape(v.marks[sm[2]], inQuery)
	})
}

func escape(s string, inQuery bool) string {
	if inQuery {
		return strings.NewReplacer("%", "%25", "&", "%26", "+", "%2B", "=", "%3D", " ", "%20").Replace(s)
	}
	return s
}

// remember keeps what later placeholders stand for from a JSON answer:
// an object's resourceVersion, uid and text; a list's resourceVersion
// (under mark) and continue token.
func (v *view) remember(b []byte, mark string) {
	var o struct {
		Metadata struct {
			Name, UID, ResourceVersion, Continue string
		}
		Items  *json.RawMessage
		Status struct{ Token string }
	}
	if json.Unmarshal(b, &o) != nil {
		return
	}
	if o.Status.Token != "" {
		v.token = o.Status.Token
	}
	if o.Items != nil {
		v.cont = o.Metadata.Continue
		if mark != "" {
			v.marks[mark] = o.Metadata.ResourceVersion
		}
		return
	}
	if n := o.Metadata.Name; n != "" {
		v.lastRV[n], v.lastUID[n], v.lastObj[n] = o.Metadata.ResourceVersion, o.Metadata.UID, string(b)
	}
}

// toJSON decodes a body of Content-Type ct (JSON, YAML or protobuf) into
// JSON text.
func toJSON(ct string, b []byte) ([]byte, error) {
	mt, _, _ := strings.Cut(ct, ";")
	switch strings.TrimSpace(mt) {
	case mediaProtobuf:
		o, err := codec.FromBody(frame.Protobuf, b)
		if err != nil {
			return nil, err
		}
		obj, err := codec.Decode(o)
		if err != nil {
			return nil, err
		}
		enc, err := codec.Encode(obj, frame.JSON)
		if err != nil {
			return nil, err
		}
		return enc.Raw, nil
	case mediaYAML:
		return yaml.YAMLToJSON(b)
	}
	return b, nil
}

// goValues replaces what a message prints of Go values with their type's
// name: kube-apiserver prints its internal types (%#v of a
// core.PodTemplateSpec, a go-cmp diff of a core.PodSpec), which the
// world, built on k8s.io/api, prints as the versioned ones (v1.…) with
// other fields, and go-cmp's output is unstable by design (it varies its
// spaces so that nothing depends on it). A diff, from the line that
// opens it to the end of the text, becomes "<diff of T>"; a value
// "pkg.T{…}" becomes "<T>".
func goValues(x string) string {
	if m := goDiff.FindStringSubmatchIndex(x); m != nil {
		x = x[:m[0]] + "\n<diff of " + x[m[2]:m[3]] + ">"
	}
	var b strings.Builder
	for {
		m := goValue.FindStringSubmatchIndex(x)
		if m == nil {
			b.WriteString(x)
			return b.String()
		}
		end, depth := -1, 0
		for i := m[1] - 1; i < len(x) && end < 0; i++ {
			switch x[i] {
			case '{':
				depth++
			case '}':
				if depth--; depth == 0 {
					end = i + 1
				}
			}
		}
		if end < 0 {
			b.WriteString(x)
			return b.String()
		}
		b.WriteString(x[:m[0]] + "<" + x[m[2]:m[3]] + ">")
		x = x[end:]
	}
}

var (
	goDiff  = regexp.MustCompile(`\n[\s\x{00a0}]*(?:\[\])?\*?[a-z][a-z0-9]*\.([A-Z][A-Za-z0-9]*)\{\n(?s:.*)$`)
	goValue = regexp.MustCompile(`\b[a-z][a-z0-9]*\.([A-Z][A-Za-z0-9]*)\{`)
)

var (
	uuidOnly      = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	uuidText      = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	tableNodePort = regexp.MustCompile(`:3[0-2]\d{3}/`)
	pointers      = regexp.MustCompile(`\(0x[0-9a-f]+\)`)
	numbers       = regexp.MustCompile(`\b\d+\b`)
	// A name generated from the harness's generateName (a fixture may
	// put a prefix before it: events.k8s.io's "ev-"), anywhere in a
	// text: its 5 random characters differ between the two servers.
	generated = regexp.MustCompile(`\bwcf-g-[a-z0-9]{5}\b`)
	// The same after the generateName of a fixture whose names end with
	// a suffix of its own (fixtures.go: an APIService's
	// "v1.wcf-g-.example.com", a CRD's "wcfgs.conformance.example.com"):
	// the random characters come after the suffix. Kept, with a "*" for
	// the random characters.
	generatedAfter = regexp.MustCompile(`\b(v1\.wcf-g-\.example\.com|wcfgs\.conformance\.example\.com)[a-z0-9]{5}\b`)
	tokenVolume    = regexp.MustCompile(`^kube-api-access-[a-z0-9]{5}$`) // the ServiceAccount admission's
	ageCell        = regexp.MustCompile(`^(\d+[smhdy])+$|^<unknown>$`)
)

// normalize decodes a JSON answer into plain values with uids and
// resourceVersions renamed in order of appearance, and what legitimately
// differs between two servers replaced: times, ages, generated names, a
// list's resourceVersion (the storage's, which every write of the cluster
// moves), signed tokens, allocated cluster IPs and node ports.
func (v *view) normalize(b []byte) (any, error) {
	var x any
	if len(b) == 0 {
		return nil, nil
	}
	if err := json.Unmarshal(b, &x); err != nil {
		return nil, err
	}
	if m, ok := x.(map[string]any); ok {
		if _, list := m["items"]; list || m["kind"] == "Table" {
			if md, ok := m["metadata"].(map[string]any); ok {
				if md["resourceVersion"] != nil {
					md["resourceVersion"] = "<list-rv>"
				}
				if c, ok := md["continue"].(string); ok && c != "" {
					md["continue"] = "<continue>"
				}
			}
		}
	}
	return v.walk(x, ""), nil
}

func (v *view) walk(x any, key string) any {
	switch y := x.(type) {
	case map[string]any:
		if key == "metadata" {
			v.nameMeta(y)
		}
		keys := make([]string, 0, len(y))
		for k := range y {
			keys = append(keys, k)
		}
		sort.Strings(keys) // names are given in a fixed order
		for _, k := range keys {
			y[k] = v.walk(y[k], k)
		}
		return y
	case []any:
		for i, e := range y {
			y[i] = v.walk(e, key)
		}
		if key == "managedFields" || key == "resourceRules" || key == "nonResourceRules" {
			// Sorted: the two sides' seconds fall differently; a rules
			// review lists its rules in the order of its informer's map.
			sort.SliceStable(y, func(i, j int) bool {
				a, _ := json.Marshal(y[i])
				b, _ := json.Marshal(y[j])
				return string(a) < string(b)
			})
		}
		return y
	case float64:
		if (key == "nodePort" || key == "healthCheckNodePort") && y >= 30000 && y <= 32767 {
			return "<node-port>"
		}
		return y
	case string:
		return v.text(y, key)
	}
	return x
}

// text normalizes one string value under key.
func (v *view) text(x, key string) any {
	x = generatedAfter.ReplaceAllString(generated.ReplaceAllString(x, "wcf-g-*"), "$1*")
	switch key {
	case "uid":
		return rename(v.uids, x, "uid")
	case "resourceVersion":
		if x == "<list-rv>" {
			return x
		}
		return rename(v.rvs, x, "rv")
	case "creationTimestamp", "deletionTimestamp", "time", "eventTime", "lastTransitionTime", "expirationTimestamp":
		return "<time>"
	case "token":
		return "<token>"
	case "serverAddress":
		return "<server-address>"
	case "clusterIP", "clusterIPs", "cells":
		// (A Table's CLUSTER-IP and PORT(S) columns too.)
		if net.ParseIP(x) != nil {
			return "<cluster-ip>"
		}
		x = tableNodePort.ReplaceAllString(x, ":<node-port>/")
		if key == "cells" {
			// A uid inside a cell (a Job's selector: controller-uid=…) is
			// named as the uids of the objects.
			x = uuidText.ReplaceAllStringFunc(x, func(u string) string { return rename(v.uids, u, "uid") })
		}
	case "message", "reason":
		x = goValues(x)
		x = uuidText.ReplaceAllString(x, "<uuid>")
		x = pointers.ReplaceAllString(x, "<pointer>")
		return numbers.ReplaceAllString(x, "<n>")
	}
	if uuidOnly.MatchString(x) {
		return rename(v.uids, x, "uid")
	}
	if strings.HasPrefix(x, "JTI=") {
		return "JTI=<jti>"
	}
	if tokenVolume.MatchString(x) {
		return "kube-api-access-*"
	}
	if ageCell.MatchString(x) {
		return "<age>"
	}
	if _, err := time.Parse(time.RFC3339, x); err == nil {
		return "<time>"
	}
	return x
}

// nameMeta names an object's uid and resourceVersion after the object:
// its k-th uid and k-th resourceVersion. A difference between the two
// servers (a write one refused) then shifts the names of that object's
// later versions only, not every later one's.
func (v *view) nameMeta(md map[string]any) {
	name, _ := md["name"].(string)
	if name == "" {
		return
	}
	name = generatedAfter.ReplaceAllString(generated.ReplaceAllString(name, "wcf-g-*"), "$1*")
	if ns, _ := md["namespace"].(string); ns != "" {
		name = ns + "/" + name
	}
	if uid, _ := md["uid"].(string); uid != "" {
		if _, ok := v.uids[uid]; !ok {
			v.uids[uid] = fmt.Sprintf("<uid %s #%d>", name, v.count("uid "+name))
		}
	}
	if rv, _ := md["resourceVersion"].(string); rv != "" && rv != "<list-rv>" {
		if _, ok := v.rvs[rv]; !ok {
			v.rvs[rv] = fmt.Sprintf("<rv %s #%d>", name, v.count("rv "+name))
		}
	}
}

// count returns how many names of key v gave before, and counts one more.
func (v *view) count(key string) int {
	if v.counts == nil {
		v.counts = map[string]int{}
	}
	v.counts[key]++
	return v.counts[key]
}

func rename(m map[string]string, x, prefix string) string {
	if x == "" {
		return ""
	}
	if n, ok := m[x]; ok {
		return n
	}
	n := fmt.Sprintf("<%s%d>", prefix, len(m)+1)
	m[x] = n
	return n
}

// event is one watch event as a client decodes it.
type event struct {
	typ string
	obj []byte // JSON
}

// splitEvents splits a watch body (JSON lines, length-prefixed protobuf)
// into its events.
func splitEvents(ct string, b []byte) ([]event, error) {
	f := frame.FormatOf(ct, true)
	sp := frame.NewSplitter(f, frame.Options{})
	var out []event
	for len(b) > 0 {
		n, ev, ok, err := sp.Next(b)
		b = b[n:]
		if err != nil {
			return out, err
		}
		if !ok {
			continue
		}
		m, err := frame.Peek(f, ev.Data)
		if err != nil {
			return out, err
		}
		av, kind, obj, err := frame.EventObject(f, ev.Data)
		if err != nil {
			return out, err
		}
		o := codec.Object{Format: f, APIVersion: av, Kind: kind, Raw: append([]byte(nil), obj...)}
		j := codec.Body(o)
		if f != frame.JSON {
			d, err := codec.Decode(o)
			if err != nil {
				return out, err
			}
			enc, err := codec.Encode(d, frame.JSON)
			if err != nil {
				return out, err
			}
			j = enc.Raw
		}
		out = append(out, event{typ: m.Type, obj: j})
	}
	return out, nil
}

// events normalizes a watch's events. A bookmark's resourceVersion is the
// storage's revision when it was sent, which any writer of the cluster
// moves: its place and annotations are compared, not its number.
func (v *view) events(evs []event) ([]any, error) {
	var out []any
	for _, e := range evs {
		if e.typ == "BOOKMARK" {
			x, err := newView().normalize(e.obj)
			if err != nil {
				return nil, err
			}
			if m, ok := x.(map[string]any); ok {
				if md, ok := m["metadata"].(map[string]any); ok {
					md["resourceVersion"] = "<the storage's revision>"
				}
			}
			out = append(out, map[string]any{"type": e.typ, "object": x})
			continue
		}
		v.remember(e.obj, "")
		x, err := v.normalize(e.obj)
		if err != nil {
			return nil, err
		}
		out = append(out, map[string]any{"type": e.typ, "object": x})
	}
	return out, nil
}

// firstDifference names the first place (a dotted path, in sorted key
// order) where a and b differ, "" if they do not.
func firstDifference(a, b any, path string) string {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok {
			return orRoot(path)
		}
		keys := map[string]bool{}
		for k := range x {
			keys[k] = true
		}
		for k := range y {
			keys[k] = true
		}
		ks := make([]string, 0, len(keys))
		for k := range keys {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		for _, k := range ks {
			if d := firstDifference(x[k], y[k], join(path, k)); d != "" {
				return d
			}
		}
		return ""
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return orRoot(path) + " (length)"
		}
		for i := range x {
			if d := firstDifference(x[i], y[i], join(path, strconv.Itoa(i))); d != "" {
				return d
			}
		}
		return ""
	}
	if fmt.Sprint(a) != fmt.Sprint(b) || (a == nil) != (b == nil) {
		return orRoot(path)
	}
	return ""
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}

func orRoot(path string) string {
	if path == "" {
		return "(the whole body)"
	}
	return path
}
