//go:build !linux

package live

import (
	"fmt"
	"runtime"

	"github.com/wtrace/wtrace/capture"
	"github.com/wtrace/wtrace/capture/pcapfile"
)

// Handle is a live capture; on this system Open always fails.
type Handle struct{}

// Open returns an error wrapping ErrUnsupported: live capture uses Linux
// AF_PACKET sockets.
func Open(iface string, opts Options) (*Handle, error) {
	return nil, fmt.Errorf("%w (this is %s)", ErrUnsupported, runtime.GOOS)
}

// Interface returns "".
func (h *Handle) Interface() string { return "" }

// Filter returns the zero Filter.
func (h *Handle) Filter() Filter { return Filter{} }

// LinkType returns the link type of the packets.
func (h *Handle) LinkType() pcapfile.LinkType { return pcapfile.LinkEthernet }

// SnapLen returns the most bytes kept of one packet.
func (h *Handle) SnapLen() int { return 0 }

// Next returns ErrClosed.
func (h *Handle) Next() (capture.Packet, error) { return capture.Packet{}, ErrClosed }

// Stats returns zero counts.
func (h *Handle) Stats() (Stats, error) { return Stats{}, nil }

// Close does nothing.
func (h *Handle) Close() error { return nil }
