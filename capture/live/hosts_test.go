package live

import (
	"fmt"
	"net/netip"
	"testing"
)

func TestResolveHosts(t *testing.T) {
	got, err := ResolveHosts([]string{"127.0.0.1", "::ffff:10.0.0.1", "::1", "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[netip.Addr]bool{netip.MustParseAddr("127.0.0.1"): true, netip.MustParseAddr("10.0.0.1"): true, netip.MustParseAddr("::1"): true}
	for _, a := range got {
		if !want[a] {
			t.Errorf("ResolveHosts: unexpected %v in %v", a, got)
		}
	}
	if len(got) < 4 {
		t.Errorf("ResolveHosts = %v; want localhost resolved too", got)
	}
	var many []string
	for i := range MaxHosts + 1 {
		many = append(many, fmt.Sprintf("10.0.0.%d", i+1))
	}
	if _, err := ResolveHosts(many); err == nil {
		t.Errorf("ResolveHosts of %d addresses: no error", len(many))
	}
}
