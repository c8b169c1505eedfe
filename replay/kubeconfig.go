package replay

import (
	"bytes"
	"encoding/base64"
	"fmt"
)

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
