package diff

import (
	"strings"
	"testing"
)

// pods is the Object of a namespace's Pods.
var pods = Object{Resource: "pods", Namespace: "demo"}

func TestNamesRegister(t *testing.T) {
	var n names
	for _, tc := range []struct {
		gen, ownerKind, owner, server, want string
	}{
		{"web-7b84c5f95f-", "ReplicaSet", "web-7b84c5f95f", "web-7b84c5f95f-kwr78", "web-7b84c5f95f-#1"},
		{"web-7b84c5f95f-", "ReplicaSet", "web-7b84c5f95f", "web-7b84c5f95f-x2kq9", "web-7b84c5f95f-#2"},
		{"web-7b84c5f95f-", "ReplicaSet", "web-7b84c5f95f", "web-7b84c5f95f-kwr78", "web-7b84c5f95f-#1"}, // again: the same
		{"job-", "Job", "nightly", "job-abcde", "job-#Job/nightly#1"},                                    // an owner the prefix does not name
		{"job-", "Job", "weekly", "job-fghjk", "job-#Job/weekly#1"},
		{"solo-", "", "", "solo-zzzzz", "solo-#1"},
		{"web-7b84c5f95f-kwr78-", "", "", "web-7b84c5f95f-kwr78-bbbbb", "web-7b84c5f95f-#1-#1"}, // named after a generated one
		{"other-", "", "", "unrelated", "unrelated"},                                            // not the generateName's: left alone
	} {
		if got := n.register(pods, tc.gen, tc.ownerKind, tc.owner, "", tc.server, 1); got != tc.want {
			t.Errorf("register(%q, %q, %q) = %q; want %q", tc.gen, tc.owner, tc.server, got, tc.want)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"web-7b84c5f95f-kwr78", "web-7b84c5f95f-#1"},
		{"Created pod: web-7b84c5f95f-x2kq9", "Created pod: web-7b84c5f95f-#2"},
		{"web-7b84c5f95f-kwr78.18ebe7f5bced6957", "web-7b84c5f95f-#1.18ebe7f5bced6957"},
		{"/api/v1/namespaces/demo/pods/web-7b84c5f95f-kwr78/status", "/api/v1/namespaces/demo/pods/web-7b84c5f95f-#1/status"},
		{"a web-7b84c5f95f-kwr78, web-7b84c5f95f-x2kq9.", "a web-7b84c5f95f-#1, web-7b84c5f95f-#2."},
		{"web-7b84c5f95f-kwr78x", "web-7b84c5f95f-kwr78x"},     // a longer name
		{"xweb-7b84c5f95f-kwr78", "xweb-7b84c5f95f-kwr78"},     // inside a longer name
		{"web-7b84c5f95f-kwr7", "web-7b84c5f95f-kwr7"},         // shorter
		{"web-7b84c5f95f-kwr78-bbbbb", "web-7b84c5f95f-#1-#1"}, // the longest match
		{"", ""},
	} {
		if got := n.canonString(tc.in); got != tc.want {
			t.Errorf("canonString(%q) = %q; want %q", tc.in, got, tc.want)
		}
		if got := string(n.canonBytes([]byte(tc.in))); got != tc.want {
			t.Errorf("canonBytes(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
	var empty *names
	if got := empty.canonString("web-7b84c5f95f-kwr78"); got != "web-7b84c5f95f-kwr78" || !empty.empty() {
		t.Errorf("an empty table changed %q", got)
	}
	if len(n.made) != 6 || n.made[0].obj.Name != "web-7b84c5f95f-#1" || n.made[0].server != "web-7b84c5f95f-kwr78" {
		t.Errorf("made = %+v", n.made)
	}
}

// TestNamesAllocs: reading a string that holds no generated name
// through the table allocates nothing, with or without names in it.
func TestNamesAllocs(t *testing.T) {
	var n names
	b := []byte("a string of a document, of some length: web-7b84c5f95f-zzzzz")
	if a := testing.AllocsPerRun(100, func() { n.canonBytes(b) }); a != 0 {
		t.Errorf("canonBytes on an empty table: %v allocations", a)
	}
	n.register(pods, "web-7b84c5f95f-", "ReplicaSet", "web-7b84c5f95f", "", "web-7b84c5f95f-kwr78", 1)
	n.register(pods, "w-", "", "", "", "w-bbbbb", 2)
	if a := testing.AllocsPerRun(100, func() { n.canonBytes(b) }); a != 0 {
		t.Errorf("canonBytes of a string without a generated name: %v allocations", a)
	}
	if got := string(n.canonBytes([]byte("x w-bbbbb web-7b84c5f95f-kwr78"))); got != "x w-#1 web-7b84c5f95f-#1" {
		t.Errorf("canonBytes = %q", got)
	}
}

// FuzzNames: registering any names and reading any strings through the
// table never panics; a registered name reads as its canonical name.
func FuzzNames(f *testing.F) {
	f.Add("web-7b84c5f95f-", "web-7b84c5f95f-kwr78", "Created pod: web-7b84c5f95f-kwr78.")
	f.Add("a-", "a-bbbbb", "a-bbbbba-bbbbb a-bbbbb")
	f.Add("", "", "")
	f.Fuzz(func(t *testing.T, gen, server, s string) {
		var n names
		c := n.register(pods, gen, "Owner", "o", "", server, 0)
		n.register(pods, gen, "", "", "", server+"x", 1)
		n.canonString(s)
		n.canonBytes([]byte(s))
		if gen != "" && len(gen) <= maxGeneratedBase && len(server) == len(gen)+genSuffixLen && strings.HasPrefix(server, gen) && n.canonString(server) != c {
			t.Fatalf("canonString(%q) = %q; registered as %q", server, n.canonString(server), c)
		}
	})
}

// TestNamesIdentity: objects a controller made for something (a
// DaemonSet's Pods, each for its node) are named by it, not by the order
// their creates were answered in; one made again for the same thing gets
// a number.
func TestNamesIdentity(t *testing.T) {
	var a, b names
	a.register(pods, "agent-", "DaemonSet", "agent", "node=n1", "agent-aaaaa", 1)
	a.register(pods, "agent-", "DaemonSet", "agent", "node=n2", "agent-bbbbb", 2)
	// The other session's answers came the other way round.
	b.register(pods, "agent-", "DaemonSet", "agent", "node=n2", "agent-ccccc", 1)
	b.register(pods, "agent-", "DaemonSet", "agent", "node=n1", "agent-ddddd", 2)
	for _, tc := range []struct{ a, b string }{{"agent-aaaaa", "agent-ddddd"}, {"agent-bbbbb", "agent-ccccc"}} {
		if ca, cb := a.canonString(tc.a), b.canonString(tc.b); ca != cb || !strings.Contains(ca, "@node=") {
			t.Errorf("canonical names %q (of %s) and %q (of %s); want one, naming the node", ca, tc.a, cb, tc.b)
		}
	}
	if c := a.register(pods, "agent-", "DaemonSet", "agent", "node=n1", "agent-eeeee", 3); c != "agent-#@node=n1#2" {
		t.Errorf("a second Pod for n1: %q", c)
	}
}

// TestNamesUIDs: a uid the session knows (of an object it created, or of
// an owner a create names) reads as the object, with its canonical name,
// wherever it appears — a whole string or inside one; others stay.
func TestNamesUIDs(t *testing.T) {
	var n names
	const (
		job = "0b8f2a4e-1c3d-4e5f-8a9b-0c1d2e3f4a5b"
		pod = "9f8e7d6c-5b4a-4392-8170-6f5e4d3c2b1a"
		unk = "11111111-2222-4333-8444-555555555555"
	)
	n.register(pods, "pi-", "Job", "pi", "", "pi-kwr78", 1)
	n.registerUID(job, "Job", "demo", "pi")
	n.registerUID(pod, "Pod", "demo", "pi-kwr78")
	n.registerUID("not-a-uid", "Pod", "demo", "x")
	for _, tc := range []struct{ in, want string }{
		{job, "<uid of Job demo/pi>"},
		{pod, "<uid of Pod demo/pi-#>"}, // one of its like: uid lists are sets
		{"controller-uid=" + job, "controller-uid=<uid of Job demo/pi>"},
		{unk, unk},
		{job + "0", job + "0"}, // a longer string
		{"x" + job, "x" + job},
	} {
		if got := n.canonString(tc.in); got != tc.want {
			t.Errorf("canonString(%q) = %q; want %q", tc.in, got, tc.want)
		}
		if got := string(n.canonBytes([]byte(tc.in))); got != tc.want {
			t.Errorf("canonBytes(%q) = %q; want %q", tc.in, got, tc.want)
		}
	}
}
