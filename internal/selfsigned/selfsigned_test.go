package selfsigned

import (
	"crypto/x509"
	"encoding/pem"
	"slices"
	"testing"
	"time"
)

func TestNew(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		host      string
		wantIPs   []string
		wantNames []string
	}{
		{"", []string{"127.0.0.1", "::1"}, []string{"localhost"}},
		{"127.0.0.1", []string{"127.0.0.1", "::1"}, []string{"localhost"}},
		{"0.0.0.0", []string{"127.0.0.1", "::1"}, []string{"localhost"}},
		{"127.0.0.2", []string{"127.0.0.1", "::1", "127.0.0.2"}, []string{"localhost"}},
		{"10.1.2.3", []string{"127.0.0.1", "::1", "10.1.2.3"}, []string{"localhost"}},
		{"localhost", []string{"127.0.0.1", "::1"}, []string{"localhost"}},
		{"replay.test", []string{"127.0.0.1", "::1"}, []string{"localhost", "replay.test"}},
	} {
		cert, pemBytes, err := New("wtrace test", tt.host, now)
		if err != nil {
			t.Fatalf("New(%q): %v", tt.host, err)
		}
		leaf := cert.Leaf
		var ips []string
		for _, ip := range leaf.IPAddresses {
			ips = append(ips, ip.String())
		}
		if !slices.Equal(ips, tt.wantIPs) || !slices.Equal(leaf.DNSNames, tt.wantNames) {
			t.Errorf("New(%q): IPs %v, names %v; want %v, %v", tt.host, ips, leaf.DNSNames, tt.wantIPs, tt.wantNames)
		}
		blk, _ := pem.Decode(pemBytes)
		if blk == nil || !slices.Equal(blk.Bytes, cert.Certificate[0]) {
			t.Errorf("New(%q): PEM does not hold the certificate", tt.host)
		}
		// The certificate is its own CA: a client that trusts it verifies
		// a connection to each of its addresses.
		pool := x509.NewCertPool()
		pool.AddCert(leaf)
		for _, name := range append(tt.wantNames, tt.wantIPs...) {
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: name, CurrentTime: now}); err != nil {
				t.Errorf("New(%q): verify for %s: %v", tt.host, name, err)
			}
		}
		if got := leaf.Subject.CommonName; got != "wtrace test" {
			t.Errorf("common name %q", got)
		}
		if !leaf.NotBefore.Before(now) || leaf.NotAfter.Sub(now) != Validity {
			t.Errorf("valid %v to %v; want around %v for %v", leaf.NotBefore, leaf.NotAfter, now, Validity)
		}
	}
}
