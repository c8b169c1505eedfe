package conformance

import (
	"context"
	"encoding/json"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wtrace/wtrace/apiserver/world"
	"github.com/wtrace/wtrace/replay"
	"github.com/wtrace/wtrace/replay/replaytest"
	"github.com/wtrace/wtrace/testkit/k8stest"
	authenticationv1 "k8s.io/api/authentication/v1"
)

var update = flag.Bool("update", false, "rewrite docs/COVERAGE.md from this run")

// namespace holds the harness's namespaced objects.
const namespace = "wcf"

const coverage = "../../docs/COVERAGE.md"

// TestConformance plays the harness's requests for every resource,
// subresource and verb of a real kube-apiserver's discovery against the
// apiserver and against a world replay of a session of its LISTs, and
// compares the coverage table with docs/COVERAGE.md (-update rewrites
// it).
func TestConformance(t *testing.T) {
	c := k8stest.Start(t)
	real := Server{URL: c.URL, Client: c.Client, Token: k8stest.Token}
	rs, docs := discover(t, c)
	checkServed(t, c, rs, docs)
	plans, exceptions := Plan(rs, namespace)
	seed(t, c, rs, exceptions)
	session := filepath.Join(t.TempDir(), "seed.wt")
	if err := WriteSession(session, lists(t, c, rs)); err != nil {
		t.Fatal(err)
	}
	// The replay takes its clients to be who the harness's token is.
	srv := replaytest.NewServer(t, session, replay.Options{User: &authenticationv1.UserInfo{
		Username: k8stest.UserName, UID: k8stest.UserUID, Groups: k8stest.UserGroups}})
	mine := Server{URL: srv.URL, Client: &http.Client{Timeout: time.Minute}}

	unserved := Unserved(rs)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	start := time.Now()
	// Discovery first: the objects the cases create (custom resource
	// definitions, APIServices) add to the apiserver's.
	results := Run(ctx, real, mine, PlanDiscovery(rs), 1)
	results = append(results, Run(ctx, real, mine, append(plans, PlanUnserved(unserved, namespace)...), 8)...)
	t.Logf("%d cases in %v", len(results), time.Since(start).Round(time.Millisecond))
	for _, r := range results {
		if !r.Same {
			t.Logf("%s %s %q: %s\n  %s %s?%s\n  replay %d: %s\n  apiserver %d: %s", r.Case.Row, r.Case.Verb, r.Case.Name, r.Why,
				r.Case.Method, r.Case.Path, r.Case.Query, r.ReplayCode, clip(r.Replay), r.RealCode, clip(r.Real))
		}
	}
	table := NewTable("API coverage: a world replay against kube-apiserver "+version(t, c), rs, results, exceptions)
	table.Unserved = NewTable("", unserved, results, nil).Rows
	table.Discovery = DiscoveryRows(rs, results)
	t.Logf("totals: %s", table.TotalsLine())
	got := table.Markdown("go test ./apiserver/conformance -run TestConformance -update")
	if *update {
		if err := os.WriteFile(coverage, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(coverage)
	if err != nil {
		t.Fatalf("%v (go test ./apiserver/conformance -run TestConformance -update writes it)", err)
	}
	if stable(string(want)) != stable(got) {
		t.Errorf("the coverage table changed (go test ./apiserver/conformance -run TestConformance -update rewrites docs/COVERAGE.md):\n%s",
			lineDiff(string(want), got))
	}
}

// stable is the part of the coverage table a run must reproduce: all of
// it but what "What differs" says of each cell after naming it (the
// cases and their first differences, which a race inside kube-apiserver
// — a controller's status write landing before or after the harness's
// next request — changes between runs of the same build).
func stable(md string) string {
	before, after, ok := strings.Cut(md, "\n## What differs\n")
	if !ok {
		return md
	}
	lines := strings.Split(after, "\n")
	for i, l := range lines {
		if name, _, ok := strings.Cut(l, "): "); ok && strings.HasPrefix(l, "- ") {
			lines[i] = name + ")"
		}
	}
	return before + "\n## What differs\n" + strings.Join(lines, "\n")
}

// discover reads the apiserver's aggregated discovery: its resources, and
// the documents of /api and /apis.
func discover(t *testing.T, c *k8stest.Cluster) ([]Resource, [][]byte) {
	t.Helper()
	var docs [][]byte
	for _, p := range []string{"/api", "/apis"} {
		resp, b := c.Do("GET", p, http.Header{"Accept": {AggregatedAccept}}, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", p, resp.StatusCode, b)
		}
		docs = append(docs, b)
	}
	rs, err := ParseDiscovery(docs...)
	if err != nil {
		t.Fatal(err)
	}
	return rs, docs
}

// servedFiles are the world's copy of the apiserver's discovery
// (world.ServedDiscovery, world.ServedDocument), which -update rewrites
// too.
var servedFiles = []string{"../world/served/api.json", "../world/served/apis.json", "../world/served/legacy.json"}

// checkServed compares the apiserver's discovery with the world's copy,
// or with -update rewrites the copy: its aggregated discovery (docs), and
// the legacy documents and /version.
func checkServed(t *testing.T, c *k8stest.Cluster, rs []Resource, docs [][]byte) {
	t.Helper()
	legacy := map[string]string{}
	for _, p := range DiscoveryPaths(rs) {
		resp, b := c.Do("GET", p, http.Header{"Accept": {mediaJSON}}, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", p, resp.StatusCode, b)
		}
		legacy[p] = string(b)
	}
	// /api names the apiserver's address, which the replay replaces with
	// its own: kept as a fixed one.
	legacy["/api"] = regexp.MustCompile(`"serverAddress":"[^"]*"`).ReplaceAllString(legacy["/api"], `"serverAddress":"127.0.0.1:6443"`)
	lj, err := json.MarshalIndent(legacy, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	want := [][]byte{docs[0], docs[1], append(lj, '\n')}
	api, apis := world.ServedDiscovery()
	have := [][]byte{api, apis, world.ServedLegacy()}
	for i := range want {
		if *update {
			if err := os.WriteFile(servedFiles[i], want[i], 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if string(have[i]) != string(want[i]) {
			t.Errorf("%s is not the apiserver's discovery (-update rewrites it)", servedFiles[i])
		}
	}
}

// version is the apiserver's gitVersion.
func version(t *testing.T, c *k8stest.Cluster) string {
	_, b := c.Do("GET", "/version", nil, nil)
	s := string(b)
	if i := strings.Index(s, `"gitVersion": "`); i >= 0 {
		s = s[i+len(`"gitVersion": "`):]
		if j := strings.IndexByte(s, '"'); j >= 0 {
			return s[:j]
		}
	}
	return "v1.33"
}

// seed creates what both servers start with: the namespace, its default
// service account (no controller makes it), and the seed object of every
// resource the harness plays.
func seed(t *testing.T, c *k8stest.Cluster, rs []Resource, exceptions map[string]string) {
	t.Helper()
	hdr := http.Header{"Content-Type": {mediaJSON}, "User-Agent": {"wtrace-conformance/1.0"}}
	post := func(path, body string) {
		if resp, b := c.Do("POST", path, hdr, []byte(body)); resp.StatusCode != http.StatusCreated {
			t.Errorf("seed %s: %d %s", path, resp.StatusCode, b)
		}
	}
	for _, ns := range []string{namespace, namespace + "-limitranges", namespace + "-resourcequotas", ReviewNamespace, EvictionNamespace} {
		post("/api/v1/namespaces", `{"metadata":{"name":"`+ns+`"}}`)
		post("/api/v1/namespaces/"+ns+"/serviceaccounts", `{"metadata":{"name":"default"}}`)
	}
	for _, r := range rs {
		f, ok := fixtureFor(r)
		if !ok || r.Subresource != "" || createOnly(r) || exceptions[r.Row()] != "" || !r.Has("create") {
			continue
		}
		ns := namespaceOf(r, namespace)
		post(r.Collection(ns), f.object(r, ns, f.objectName(Seed), false, nil))
	}
}

// lists reads every resource's collection of every namespace, as the
// session's LISTs.
func lists(t *testing.T, c *k8stest.Cluster, rs []Resource) []List {
	t.Helper()
	var out []List
	for _, r := range rs {
		if r.Subresource != "" || !r.Has("list") {
			continue
		}
		p := r.Collection("") // every namespace's
		resp, b := c.Do("GET", p, http.Header{"Accept": {mediaJSON}}, nil)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("LIST %s: %d %s", p, resp.StatusCode, b)
			continue
		}
		out = append(out, List{Target: p, Body: b})
	}
	return out
}

// lineDiff shows the lines of b that are not in a and the reverse.
func lineDiff(a, b string) string {
	in := func(s string) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(s, "\n") {
			m[l] = true
		}
		return m
	}
	ia, ib := in(a), in(b)
	var out []string
	for _, l := range strings.Split(a, "\n") {
		if !ib[l] {
			out = append(out, "- "+l)
		}
	}
	for _, l := range strings.Split(b, "\n") {
		if !ia[l] {
			out = append(out, "+ "+l)
		}
	}
	return strings.Join(out, "\n")
}
