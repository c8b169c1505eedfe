package replay

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// selfSigned makes an ECDSA P-256 certificate for 127.0.0.1, ::1, localhost
// and the given extra host, valid for a year, that is its own CA (so a
// kubeconfig can name it as certificate-authority-data).
func selfSigned(extraHost string, now time.Time) (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("replay: generating key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("replay: generating serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "wtrace replay", Organization: []string{"wtrace"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	if extraHost != "" && extraHost != "localhost" {
		if ip := net.ParseIP(extraHost); ip != nil {
			if !ip.IsLoopback() && !ip.IsUnspecified() {
				tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
			}
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, extraHost)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("replay: creating certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("replay: parsing certificate: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, certPEM, nil
}

// kubeconfig renders a kubeconfig for server URL u: the CA (PEM, for
// https) and, for https, a dummy bearer token (the replay accepts any
// credentials; client-go sends a token only over TLS anyway).
func kubeconfig(u string, caPEM []byte) []byte {
	var b bytes.Buffer
	b.WriteString("apiVersion: v1\nkind: Config\nclusters:\n- name: wtrace-replay\n  cluster:\n")
	fmt.Fprintf(&b, "    server: %s\n", u)
	if len(caPEM) > 0 {
		fmt.Fprintf(&b, "    certificate-authority-data: %s\n", base64.StdEncoding.EncodeToString(caPEM))
	}
	b.WriteString("contexts:\n- name: wtrace-replay\n  context:\n    cluster: wtrace-replay\n    user: wtrace-replay\n")
	b.WriteString("current-context: wtrace-replay\nusers:\n- name: wtrace-replay\n  user:")
	if len(caPEM) > 0 {
		b.WriteString("\n    token: wtrace-replay-dummy-token\n")
	} else {
		b.WriteString(" {}\n")
	}
	return b.Bytes()
}

func pemEncode(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
