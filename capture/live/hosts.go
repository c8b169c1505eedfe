package live

import (
	"fmt"
	"net"
	"net/netip"
)

// ResolveHosts turns hosts given by a user (IP addresses or names, as
// `wtrace record --host` takes them) into the addresses of a Filter:
// names are looked up, IPv4-mapped addresses unmapped. More than MaxHosts
// addresses is an error.
func ResolveHosts(hosts []string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, h := range hosts {
		if a, err := netip.ParseAddr(h); err == nil {
			out = append(out, a.Unmap())
			continue
		}
		ips, err := net.LookupIP(h)
		if err != nil {
			return nil, fmt.Errorf("live: host %s: %w", h, err)
		}
		for _, ip := range ips {
			if a, ok := netip.AddrFromSlice(ip); ok {
				out = append(out, a.Unmap())
			}
		}
	}
	if len(out) > MaxHosts {
		return nil, fmt.Errorf("live: %d host addresses; at most %d", len(out), MaxHosts)
	}
	return out, nil
}
