package k8stest

// ReadingNamespace and ReadingConfigMap are where ReadingTargets read.
const (
	ReadingNamespace = "default"
	ReadingConfigMap = "cm-watched"
)

// ReadingTargets are requests whose reading wtrace's packages once disagreed on
// (is it a watch; which object does it name), each as kube-apiserver
// v1.33 serves it, in namespace ReadingNamespace, where ConfigMap
// ReadingConfigMap exists: internal/apipath's TestParseAgainstAPIServer
// checks apipath.Parse against the real apiserver; the recording
// proxy's and the replay's tests record the same requests from it and
// replay them.
var ReadingTargets = []struct {
	Method, Target string
}{
	{"GET", "/api/v1/namespaces/default/configmaps?watch=true&timeoutSeconds=1"},
	{"GET", "/api/v1/namespaces/default/configmaps?watch=1&timeoutSeconds=1"},
	{"GET", "/api/v1/namespaces/default/configmaps?watch=yes&timeoutSeconds=1"}, // any value but false and 0
	{"GET", "/api/v1/namespaces/default/configmaps?watch&timeoutSeconds=1"},     // the empty value
	{"GET", "/api/v1/namespaces/default/configmaps?watch=FALSE"},                // a LIST
	{"GET", "/api/v1/namespaces/default/configmaps?watch=0"},                    // a LIST
	{"GET", "/api/v1/namespaces/default/configmaps/cm-watched?watch=1"},         // a GET of one object
	{"GET", "/api/v1/namespaces/default/configmaps/cm-watched?watch=true&timeoutSeconds=1"},
	{"GET", "/api/v1/watch/namespaces/default/configmaps?timeoutSeconds=1"},                   // the legacy segment
	{"GET", "/api/v1/watch/namespaces/default/configmaps/cm-watched?timeoutSeconds=1"},        // a legacy watch of one object
	{"GET", "/api/v1/%77atch/namespaces/default/configmaps?timeoutSeconds=1"},                 // the decoded path is routed
	{"GET", "/api/v1/namespaces/default/configmaps?xwatch=true&timeoutSeconds=1&watch=true%"}, // a pair that does not decode is left out
	{"GET", "/api/v1/namespaces/default/configmaps?sendInitialEvents=true&watch=1&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1"},
	{"HEAD", "/api/v1/namespaces/default/configmaps?watch=true"}, // a HEAD is never a stream
}
