package apipath

// MaxTargetLen bounds a request-target that is parsed (recorded or
// incoming): Kubernetes clients stay far below it; net/http's own header
// limit is 1 MiB.
const MaxTargetLen = 64 << 10

// IsWrite reports whether a request of this method is one kube-apiserver
// may change its objects for: POST, PUT, PATCH, DELETE (a dry run or a
// failure included; the caller decides what a failed attempt means).
func IsWrite(method string) bool {
	switch method {
	case "POST", "PUT", "PATCH", "DELETE":
		return true
	}
	return false
}
