package openapi

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestDocs: the v3 index names a document for every path it lists, each
// one is JSON, and the apps/v1 one says PATCH takes fieldValidation (what
// kubectl looks for before it leaves validation to the server).
func TestDocs(t *testing.T) {
	root, ok := Doc("/openapi/v3")
	if !ok {
		t.Fatal("no v3 index")
	}
	var index struct {
		Paths map[string]struct {
			ServerRelativeURL string `json:"serverRelativeURL"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(root, &index); err != nil {
		t.Fatal(err)
	}
	if len(index.Paths) < 30 {
		t.Fatalf("%d paths in the v3 index; want the built-in groups", len(index.Paths))
	}
	for p, ref := range index.Paths {
		b, ok := Doc(ref.ServerRelativeURL)
		if !ok {
			t.Errorf("Doc(%q) (for %s) not found", ref.ServerRelativeURL, p)
			continue
		}
		if !json.Valid(b) {
			t.Errorf("Doc(%q) is not JSON", ref.ServerRelativeURL)
		}
	}
	apps, _ := Doc("/openapi/v3/apis/apps/v1")
	if !strings.Contains(string(apps), `"fieldValidation"`) {
		t.Error("apps/v1 does not name the fieldValidation parameter")
	}
	if b, ok := Doc("/openapi/v2"); !ok || !json.Valid(b) {
		t.Error("no v2 document")
	}
	for _, p := range []string{"/openapi/v3/", "/openapi/v3/../v2", "/openapi/v3/apis/nope/v1", "/openapi/v4", "/api"} {
		if _, ok := Doc(p); ok {
			t.Errorf("Doc(%q) found; want none", p)
		}
	}
}
