package stream

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// status is a Kubernetes metav1.Status, as the apiserver sends for errors.
type status struct {
	Kind       string   `json:"kind"`
	APIVersion string   `json:"apiVersion"`
	Metadata   struct{} `json:"metadata"`
	Status     string   `json:"status"`
	Message    string   `json:"message"`
	Reason     string   `json:"reason"`
	Code       int      `json:"code"`
}

// StatusJSON encodes a failure Status.
func StatusJSON(code int, reason, message string) []byte {
	b, _ := json.Marshal(status{Kind: "Status", APIVersion: "v1", Status: "Failure", Message: message, Reason: reason, Code: code})
	return b
}

// WriteStatus answers with a failure Status, as JSON, with HTTP status code.
func WriteStatus(w http.ResponseWriter, code int, reason, message string) {
	b := StatusJSON(code, reason, message)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", itoa(len(b)))
	h.Set("Cache-Control", "no-cache, private")
	w.WriteHeader(code)
	w.Write(b)
}

func itoa(n int) string { return strconv.Itoa(n) }
