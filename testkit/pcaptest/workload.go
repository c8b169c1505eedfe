package pcaptest

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// Synthetic workloads for the memory and time tests of the recorder
// (issue 15): each writes its packets to a Builder, usually one whose Emit
// streams them out (tools/pcapgen writes them to a file).

const (
	server  = "127.0.0.1:8001"
	getHead = "GET /api/v1/namespaces/default/configmaps/cm-%d HTTP/1.1\r\nHost: 127.0.0.1:8001\r\nUser-Agent: kubectl/v1.33.13\r\nAccept: application/json\r\n\r\n"
)

func objectResponse(i int) string {
	body := fmt.Sprintf(`{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm-%d","namespace":"default","resourceVersion":"%d"},"data":{"k":"v"}}`, i, 1000+i)
	return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

// client returns the i-th client address (distinct for 2²⁴ connections).
func client(i int) string {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, byte(1 + i>>16), byte(i >> 8), byte(i)}), 40000).String()
}

// Exchanges writes n GET exchanges (a small JSON object each) over conns
// keep-alive connections, taking turns; the connections then close.
func Exchanges(b *Builder, conns, n int) {
	cs := make([]*Conn, conns)
	for i := range cs {
		cs[i] = b.Conn(client(i), server, true)
	}
	for i := range n {
		c := cs[i%conns]
		c.Send(ToServer, []byte(fmt.Sprintf(getHead, i)))
		c.Send(ToClient, []byte(objectResponse(i)))
	}
	for _, c := range cs {
		c.FIN(ToServer)
		c.FIN(ToClient)
	}
}

// Connections writes n connections one after the other, gap apart, each
// carrying one GET exchange between its handshake and its end: FINs both
// ways (end "fin"), a reset by the client ("rst"), or the client's FIN
// alone ("half").
func Connections(b *Builder, n int, gap time.Duration, end string) {
	for i := range n {
		c := b.Conn(client(i), server, true)
		c.Send(ToServer, []byte(fmt.Sprintf(getHead, i)))
		c.Send(ToClient, []byte(objectResponse(i)))
		switch end {
		case "rst":
			c.RST(ToServer)
		case "half":
			c.FIN(ToServer)
		default:
			c.FIN(ToServer)
			c.FIN(ToClient)
		}
		b.Advance(gap)
	}
}

// Pipelined writes one connection on which the client sends n requests
// back to back before the server answers them in order.
func Pipelined(b *Builder, n int) {
	c := b.Conn(client(0), server, true)
	for i := range n {
		c.Send(ToServer, []byte(fmt.Sprintf(getHead, i)))
	}
	for i := range n {
		c.Send(ToClient, []byte(objectResponse(i)))
	}
	c.FIN(ToServer)
	c.FIN(ToClient)
}

// Watches writes n one-event watches one after the other, each on its
// own connection.
func Watches(b *Builder, n int) {
	for i := range n {
		c := b.Conn(client(i), server, true)
		c.Send(ToServer, []byte(watchHead))
		c.Send(ToClient, []byte(fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n%s0\r\n\r\n", watchChunk(i))))
		c.FIN(ToClient)
		c.FIN(ToServer)
	}
}

// OpenWatches writes n watches, each on its own connection, that stay
// open: each has its response head and one event, then nothing more
// until the capture ends (an informer's watches between events).
func OpenWatches(b *Builder, n int) {
	for i := range n {
		c := b.Conn(client(i), server, true)
		c.Send(ToServer, []byte(watchHead))
		c.Send(ToClient, []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"+watchChunk(i)))
	}
}

const watchHead = "GET /api/v1/namespaces/default/configmaps?watch=true HTTP/1.1\r\nHost: 127.0.0.1:8001\r\n\r\n"

// watchChunk is the i-th watch event, a chunk of its own.
func watchChunk(i int) string {
	ev := fmt.Sprintf(`{"type":"ADDED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm-%d","namespace":"default","resourceVersion":"%d"}}}`, i, 1000+i)
	return fmt.Sprintf("%x\r\n%s\n\r\n", len(ev)+1, ev)
}

// Unanswered writes one connection on which the client sends n requests
// back to back that the server never answers before the capture ends.
func Unanswered(b *Builder, n int) {
	c := b.Conn(client(0), server, true)
	for i := range n {
		c.Send(ToServer, []byte(fmt.Sprintf(getHead, i)))
	}
}

// GzipSecretList writes one LIST of Secrets answered gzip'd: a body of
// about size bytes of JSON (each Secret's value long and repetitive), so
// that a small capture expands to a large body.
func GzipSecretList(b *Builder, size int) {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	fmt.Fprint(zw, `{"kind":"SecretList","apiVersion":"v1","metadata":{"resourceVersion":"7"},"items":[`)
	value := strings.Repeat("c2VjcmV0", 1<<17) // 1 MiB of base64
	for i, n := 0, 0; n < size; i++ {
		if i > 0 {
			fmt.Fprint(zw, ",")
		}
		k, _ := fmt.Fprintf(zw, `{"metadata":{"name":"s-%d","namespace":"default"},"type":"Opaque","data":{"token":"%s"}}`, i, value)
		n += k
	}
	fmt.Fprint(zw, `]}`)
	zw.Close()
	c := b.Conn(client(0), server, true)
	c.Send(ToServer, []byte("GET /api/v1/secrets HTTP/1.1\r\nHost: 127.0.0.1:8001\r\nAccept: application/json\r\nAccept-Encoding: gzip\r\n\r\n"))
	c.MSS = 65483
	c.Send(ToClient, []byte(fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n", buf.Len())))
	c.Send(ToClient, buf.Bytes())
	c.FIN(ToServer)
	c.FIN(ToClient)
}

// SteadyWatch writes one informer's LIST and WATCH of ConfigMaps in
// namespace "steady": a LIST of 10 objects at resourceVersion 1000, then
// a watch from there carrying n MODIFIED events gap apart, each of about
// size bytes and in a chunk of its own, ended cleanly a gap after the
// last. Replayed, every watcher gets the same steady timeline (the
// scale-out measurement and the metrics tests).
func SteadyWatch(b *Builder, n int, gap time.Duration, size int) {
	c := b.Conn(client(0), server, true)
	var items []string
	for i := range 10 {
		items = append(items, fmt.Sprintf(`{"metadata":{"name":"cm-%d","namespace":"steady","resourceVersion":"%d"},"data":{"k":"v"}}`, i, 990+i))
	}
	list := `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"1000"},"items":[` + strings.Join(items, ",") + `]}`
	c.Send(ToServer, []byte("GET /api/v1/namespaces/steady/configmaps?limit=500&resourceVersion=0 HTTP/1.1\r\nHost: 127.0.0.1:8001\r\nAccept: application/json\r\n\r\n"))
	c.Send(ToClient, []byte(fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(list), list)))
	b.Advance(time.Millisecond)
	c.Send(ToServer, []byte("GET /api/v1/namespaces/steady/configmaps?allowWatchBookmarks=true&resourceVersion=1000&timeoutSeconds=3600&watch=true HTTP/1.1\r\nHost: 127.0.0.1:8001\r\nAccept: application/json\r\n\r\n"))
	c.Send(ToClient, []byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"))
	pad := strings.Repeat("x", max(size-160, 1))
	for i := range n {
		b.Advance(gap)
		ev := fmt.Sprintf(`{"type":"MODIFIED","object":{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"cm-%d","namespace":"steady","resourceVersion":"%d"},"data":{"pad":"%s"}}}`, i%10, 1001+i, pad)
		c.Send(ToClient, []byte(fmt.Sprintf("%x\r\n%s\n\r\n", len(ev)+1, ev)))
	}
	b.Advance(gap)
	c.Send(ToClient, []byte("0\r\n\r\n"))
	c.FIN(ToServer)
	c.FIN(ToClient)
}
