package replay

import (
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/wtrace/wtrace/internal/selfsigned"
)

// Certificate is the certificate a Server started with StartTLS serves:
// the PEM pair in certFile and keyFile, or with generate a self-signed one
// for the host of listen (host:port) — nil when neither is asked for.
func Certificate(certFile, keyFile string, generate bool, listen string) (*tls.Certificate, error) {
	switch {
	case certFile != "":
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("loading the certificate %s and key %s: %w", certFile, keyFile, err)
		}
		return &cert, nil
	case generate:
		host, _, _ := net.SplitHostPort(listen)
		cert, _, err := selfsigned.New("wtrace replay", host, time.Now())
		if err != nil {
			return nil, err
		}
		return &cert, nil
	}
	return nil, nil
}
