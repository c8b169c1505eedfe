package world_test

import (
	"encoding/json"
	"net/url"
	"testing"
)

// TestPaginatedLists: a LIST with a limit is answered page by page, each
// page of the first one's snapshot (its resourceVersion), with a continue
// token and remainingItemCount while objects remain, until the pages hold
// the whole list in its order; a bad token is 400, as from the apiserver.
func TestPaginatedLists(t *testing.T) {
	st, _ := load(t, "basic-json")
	const cms = "/api/v1/namespaces/corpus-basic/configmaps"
	type list struct {
		Metadata struct {
			ResourceVersion    string
			Continue           string
			RemainingItemCount *int64
		}
		Items []struct{ Metadata struct{ Name string } }
	}
	read := func(query string) list {
		t.Helper()
		r := do(t, st, "GET", cms, query, nil, "")
		if r.Code != 200 {
			t.Fatalf("LIST ?%s: %d %s", query, r.Code, r.Body)
		}
		var l list
		if err := json.Unmarshal(r.Body, &l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	whole := read("")
	if len(whole.Items) < 3 {
		t.Fatalf("%d ConfigMaps; want a few to page", len(whole.Items))
	}
	// A write between the pages is not in them: they are one snapshot.
	var names []string
	l := read("limit=2")
	do(t, st, "POST", cms, "", nil, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"aaa-between-pages"}}`)
	for {
		for _, it := range l.Items {
			names = append(names, it.Metadata.Name)
		}
		if l.Metadata.ResourceVersion != whole.Metadata.ResourceVersion {
			t.Errorf("a page at %s; want the first one's, %s", l.Metadata.ResourceVersion, whole.Metadata.ResourceVersion)
		}
		if l.Metadata.Continue == "" {
			if l.Metadata.RemainingItemCount != nil {
				t.Errorf("the last page says %d remain", *l.Metadata.RemainingItemCount)
			}
			break
		}
		if want := int64(len(whole.Items) - len(names)); l.Metadata.RemainingItemCount == nil || *l.Metadata.RemainingItemCount != want {
			t.Errorf("remainingItemCount %v after %d items; want %d", l.Metadata.RemainingItemCount, len(names), want)
		}
		l = read("limit=2&continue=" + url.QueryEscape(l.Metadata.Continue))
	}
	if len(names) != len(whole.Items) {
		t.Fatalf("the pages hold %v; want the %d of the list", names, len(whole.Items))
	}
	for i, it := range whole.Items {
		if names[i] != it.Metadata.Name {
			t.Fatalf("the pages hold %v; want the list's order", names)
		}
	}
	for _, q := range []string{"continue=nonsense", "continue=eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MSwic3RhcnQiOiIvLi4vYSJ9", "limit=2&continue=x&resourceVersion=5"} {
		if r := do(t, st, "GET", cms, q, nil, ""); r.Code != 400 {
			t.Errorf("LIST ?%s: %d %s; want 400", q, r.Code, r.Body)
		}
	}
}
