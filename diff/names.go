package diff

import (
	"strconv"
	"strings"
)

// Generated names. An object created with metadata.generateName gets its
// name from the apiserver (generateName and 5 random characters,
// k8s.io/apiserver's SimpleNameGenerator), so the same create has another
// name in every run. diff names such an object, in each session, after
// how it was made: its generateName, its controlling owner (unless the
// generateName starts with the owner's name, as the Pods of a ReplicaSet
// do) and its place among the successful creates of that generateName and
// owner in the session, in the order their answers arrived:
// "web-796cf5c97c-#1" is the first Pod created as "web-796cf5c97c-". The
// name is the same in two sessions that made the same creates, and it
// replaces the server's name wherever diff reads one — paths, object
// names, every string of every document (an Event's message "Created pod:
// web-796cf5c97c-kwr78", its involvedObject, a name built on a generated
// one such as "web-796cf5c97c-kwr78.18ebe7f5bced6957") — so that the
// creates, and everything about the objects they made, pair by how they
// were made, not by the name the server drew. Report.Pairing says which
// server name in A is which in B.

// genSuffixLen is the length of the random suffix the apiserver appends
// to a generateName (k8s.io/apiserver/pkg/storage/names: 5).
const genSuffixLen = 5

// maxGeneratedBase is how much of a generateName the apiserver keeps:
// 63 − genSuffixLen (names.MaxGeneratedNameLength).
const maxGeneratedBase = 63 - genSuffixLen

// maxGenerated bounds the generated names a session's table holds: past
// it, names are left as the server gave them (a session of more creates
// than that compares them by name, as before).
const maxGenerated = 1 << 20

// names is one session's table of generated names: the server's name →
// the name diff uses. The zero value is empty; canon on an empty table
// returns its argument. Not safe for concurrent use.
type names struct {
	canon    map[string]string   // server name → canonical name
	uids     map[string]string   // an object's uid → what names it (uidText)
	heads    map[string][]string // generateNames (as kept) by their first headLen bytes, to find names inside strings
	isPrefix map[string]bool
	ord      map[string]int // resource, namespace, generateName, owner → creates so far
	made     []generated    // in the order they were registered
}

// generated is one object whose name the server generated.
type generated struct {
	obj       Object // Name is the canonical name
	server    string // the name the server gave
	exchange  int64  // the create
	generate  string // metadata.generateName as sent
	ownerKind string
	ownerName string // as sent
}

// register notes that the create of exchange id (resource o, namespace
// ns) with generateName gen and controlling owner (ownerKind, ownerName),
// got the name server; it returns the canonical name. identity, if not
// "", is what the controller made the object for (package
// internal/ident: "node=n1" for a DaemonSet's Pod): the object is named
// by it, "agent-#@node=n1", instead of by its place among the creates —
// two Pods created at once for two nodes pair by their node, whatever
// order their answers came in.
func (n *names) register(o Object, gen, ownerKind, ownerName, identity, server string, id int64) string {
	n.init()
	if c, ok := n.canon[server]; ok {
		return c
	}
	if len(gen) > maxGeneratedBase {
		gen = gen[:maxGeneratedBase] // what the apiserver keeps of a long one
	}
	if gen == "" || len(server) != len(gen)+genSuffixLen || len(n.canon) >= maxGenerated || !strings.HasPrefix(server, gen) {
		return server
	}
	cgen := n.canonString(gen)
	cowner := n.canonString(ownerName)
	label := cgen + "#"
	if ownerName != "" && !strings.HasPrefix(gen, ownerName) {
		label += ownerKind + "/" + cowner + "#"
	}
	c := ""
	if identity != "" {
		label += "@" + identity
		k := o.Group + "\x00" + o.Resource + "\x00" + o.Namespace + "\x00" + label
		n.ord[k]++
		c = label
		if n.ord[k] > 1 { // made again for the same (a Pod replaced on its node)
			c += "#" + strconv.Itoa(n.ord[k])
		}
	} else {
		k := o.Group + "\x00" + o.Resource + "\x00" + o.Namespace + "\x00" + label
		n.ord[k]++
		c = label + strconv.Itoa(n.ord[k])
	}
	n.canon[server] = c
	if !n.isPrefix[gen] {
		n.isPrefix[gen] = true
		h := gen[:min(headLen, len(gen))]
		n.heads[h] = append(n.heads[h], gen)
	}
	o.Name = c
	n.made = append(n.made, generated{obj: o, server: server, exchange: id, generate: gen, ownerKind: ownerKind, ownerName: ownerName})
	return c
}

func (n *names) init() {
	if n.canon == nil {
		n.canon, n.isPrefix, n.ord, n.heads = map[string]string{}, map[string]bool{}, map[string]int{}, map[string][]string{}
		n.uids = map[string]string{}
	}
}

// Uids. The apiserver gives every object a new uid, and controllers write
// the uids of the objects they work with into others: a Job's uid into
// its Pods' labels and its selector (controller-uid,
// batch.kubernetes.io/controller-uid), the uids of its finished Pods into
// status.uncountedTerminatedPods, owners' uids into ownerReferences. diff
// leaves out every member named "uid", and reads every other uid it knows
// — of an object a create made (its answer's metadata.uid), of an owner
// a create names (its ownerReferences) — as the object it names, with
// its canonical name: "<uid of Job demo/pi>" in both sessions, wherever
// it appears (a label value, an element of a list, inside a selector's
// string); an object named by its place among its like without it
// ("<uid of Pod demo/pi-#>"). A uid diff does not know stays as it is:
// it differs.

// maxUIDs bounds the uids a session's table holds (as maxGenerated does
// the names).
const maxUIDs = 1 << 20

// uidLen is the length of a uid as the apiserver makes them (a UUID in
// its text form, RFC 9562 section 4).
const uidLen = 36

// registerUID notes that uid is the object of kind, namespace ns and
// server name (read through the table: call it after register).
func (n *names) registerUID(uid, kind, ns, name string) {
	if !isUID(uid) || kind == "" || name == "" {
		return
	}
	n.init()
	if _, ok := n.uids[uid]; ok || len(n.uids) >= maxUIDs {
		return
	}
	obj := n.canonString(name)
	if i := strings.LastIndexByte(obj, '#'); i >= 0 && !strings.Contains(obj, "@") && obj != name {
		// Named by its place among its like ("pi-#2"): a uid of it reads
		// as one of its like ("pi-#"). The place is the order the creates
		// were answered in, and a list of uids is the order a controller's
		// cache listed them (a Job's status.uncountedTerminatedPods): a
		// set, whose order says nothing.
		if _, err := strconv.Atoi(obj[i+1:]); err == nil {
			obj = obj[:i+1]
		}
	}
	if ns != "" {
		obj = ns + "/" + obj
	}
	n.uids[uid] = "<uid of " + kind + " " + obj + ">"
}

// isUID reports whether s is a UUID in its text form (8-4-4-4-12 hex
// digits, lower case as the apiserver writes them).
func isUID(s string) bool {
	if len(s) != uidLen {
		return false
	}
	for i := 0; i < uidLen; i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
	}
	return true
}

// uidAt returns what the known uid starting at s[i] names (between
// non-alphanumerics), "" if none.
func (n *names) uidAt(s string, i int) string {
	if len(n.uids) == 0 || len(s)-i < uidLen || s[i+8] != '-' || (i+uidLen < len(s) && alnum(s[i+uidLen])) {
		return ""
	}
	return n.uids[s[i:i+uidLen]]
}

// empty reports whether the table holds no name (canon is then the
// identity, and costs nothing).
func (n *names) empty() bool { return n == nil || len(n.canon) == 0 && len(n.uids) == 0 }

// headLen is how many first bytes of a generateName index it (names.heads).
const headLen = 2

// canonString replaces every generated name in s (a whole name, or one
// inside a message, a path, a name built on it such as a child's
// generateName "web-7b84c5f95f-kwr78-") by its canonical name. A name
// inside s counts where the bytes around it are not lower-case letters or
// digits (a longer random suffix is another name). The longest name
// found at a place wins.
func (n *names) canonString(s string) string {
	if n.empty() || len(s) < genSuffixLen+1 {
		return s
	}
	if c, ok := n.canon[s]; ok {
		return c
	}
	if c, ok := n.uids[s]; ok {
		return c
	}
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); {
		c, l := n.at(s, i)
		if l == 0 {
			i++
			continue
		}
		b.WriteString(s[last:i])
		b.WriteString(c)
		i += l
		last = i
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// at returns the canonical name of the longest generated name starting
// at s[i] (between non-alphanumerics), and its length; 0 if none.
func (n *names) at(s string, i int) (string, int) {
	if i > 0 && alnum(s[i-1]) || len(s)-i < genSuffixLen+1 {
		return "", 0
	}
	if c := n.uidAt(s, i); c != "" {
		return c, uidLen
	}
	best, bestLen := "", 0
	for _, hl := range [...]int{1, headLen} {
		if i+hl > len(s) {
			break
		}
		for _, p := range n.heads[s[i:i+hl]] {
			end := i + len(p) + genSuffixLen
			if len(p) < hl || (hl < headLen && len(p) >= headLen) || end > len(s) || s[i:i+len(p)] != p || (end < len(s) && alnum(s[end])) {
				continue
			}
			if c, ok := n.canon[s[i:end]]; ok && end-i > bestLen {
				best, bestLen = c, end-i
			}
		}
	}
	return best, bestLen
}

// canonBytes is canonString for bytes; it returns b itself, without
// allocating, when it holds no generated name.
func (n *names) canonBytes(b []byte) []byte {
	if n.empty() || len(b) < genSuffixLen+1 || !n.holds(b) {
		return b
	}
	return []byte(n.canonString(string(b)))
}

// holds reports whether b holds a generated name (canonString would
// change it), without allocating.
func (n *names) holds(b []byte) bool {
	for i := 0; i+genSuffixLen < len(b); i++ {
		if i > 0 && alnum(b[i-1]) {
			continue
		}
		if len(n.uids) > 0 && len(b)-i >= uidLen && b[i+8] == '-' && (i+uidLen == len(b) || !alnum(b[i+uidLen])) {
			if _, ok := n.uids[string(b[i:i+uidLen])]; ok {
				return true
			}
		}
		for _, hl := range [...]int{1, headLen} {
			if i+hl > len(b) {
				break
			}
			for _, p := range n.heads[string(b[i:i+hl])] {
				end := i + len(p) + genSuffixLen
				if len(p) < hl || (hl < headLen && len(p) >= headLen) || end > len(b) || string(b[i:i+len(p)]) != p || (end < len(b) && alnum(b[end])) {
					continue
				}
				if _, ok := n.canon[string(b[i:end])]; ok {
					return true
				}
			}
		}
	}
	return false
}

// alnum: a lower-case letter or a digit (what a generated suffix is made
// of).
func alnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
