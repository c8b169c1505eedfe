package conformance

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"strings"
	"sync"
)

// Label marks every object the harness makes: lists and watches of
// cluster-scoped resources select it, so that what the apiserver itself
// keeps changing (its leases, flow-control objects, APIService statuses)
// is left out of both sides' answers.
const Label = "wtrace-conformance"

// fixture is how to make a valid object of one resource: the members of
// its JSON besides apiVersion, kind and metadata, for an object named
// name; and, for resources whose names have a form, the name a base name
// stands for.
type fixture struct {
	fields func(ns, name string) string
	name   func(base string) string
}

// static is a fixture whose fields do not depend on the object's name.
func static(fields string) fixture {
	return fixture{fields: func(string, string) string { return fields }}
}

const podSpec = `{"containers":[{"name":"c","image":"busybox:1.36"}]}`

var template = `{"metadata":{"labels":{"app":"wcf"}},"spec":` + podSpec + `}`

// fixtures are keyed by group/resource (the version left out: both
// autoscaling versions of HorizontalPodAutoscalers share theirs but for
// what differs, see fixtureFor).
var fixtures = map[string]fixture{
	"configmaps":             static(`"data":{"k":"v"}`),
	"endpoints":              static(`"subsets":[{"addresses":[{"ip":"10.0.0.1"}],"ports":[{"port":80}]}]`),
	"events":                 {fields: coreEvent},
	"limitranges":            static(`"spec":{"limits":[{"type":"Container","default":{"cpu":"100m"}}]}`),
	"namespaces":             static(`"spec":{}`),
	"nodes":                  static(`"spec":{}`),
	"persistentvolumeclaims": static(`"spec":{"accessModes":["ReadWriteOnce"],"resources":{"requests":{"storage":"1Gi"}}}`),
	"persistentvolumes":      static(`"spec":{"capacity":{"storage":"1Gi"},"accessModes":["ReadWriteOnce"],"hostPath":{"path":"/tmp/wcf"}}`),
	"pods":                   static(`"spec":` + podSpec),
	"podtemplates":           static(`"template":` + template),
	"replicationcontrollers": static(`"spec":{"replicas":1,"selector":{"app":"wcf"},"template":` + template + `}`),
	"resourcequotas":         static(`"spec":{"hard":{"pods":"10"}}`),
	"secrets":                static(`"type":"Opaque","data":{"k":"dg=="}`),
	"serviceaccounts":        static(``),
	"services":               static(`"spec":{"ports":[{"port":80}],"selector":{"app":"wcf"}}`),

	"apiregistration.k8s.io/apiservices": {fields: apiService, name: func(b string) string { return "v1." + b + ".example.com" }},

	"apps/controllerrevisions": static(`"revision":1,"data":{"wcf":1}`),
	"apps/daemonsets":          static(`"spec":{"selector":{"matchLabels":{"app":"wcf"}},"template":` + template + `}`),
	"apps/deployments":         static(`"spec":{"replicas":1,"selector":{"matchLabels":{"app":"wcf"}},"template":` + template + `}`),
	"apps/replicasets":         static(`"spec":{"replicas":1,"selector":{"matchLabels":{"app":"wcf"}},"template":` + template + `}`),
	"apps/statefulsets":        static(`"spec":{"replicas":1,"serviceName":"wcf","selector":{"matchLabels":{"app":"wcf"}},"template":` + template + `}`),

	"events.k8s.io/events": {name: func(b string) string { return "ev-" + b }, fields: func(ns, _ string) string {
		return `"eventTime":"2026-12-01T10:00:00.000000Z","reportingController":"example.com/wcf","reportingInstance":"wcf-1",` +
			`"action":"Check","reason":"Checked","type":"Normal","regarding":{"kind":"Pod","namespace":"` + ns + `","name":"p"},"note":"n"`
	}},

	"authentication.k8s.io/selfsubjectreviews": static(``),
	"authentication.k8s.io/tokenreviews":       static(`"spec":{"token":"not-a-token"}`),

	"authorization.k8s.io/localsubjectaccessreviews": {fields: func(ns, _ string) string {
		return `"spec":{"user":"alice","resourceAttributes":{"namespace":"` + ns + `","verb":"get","resource":"pods"}}`
	}},
	"authorization.k8s.io/selfsubjectaccessreviews": {fields: func(ns, _ string) string {
		return `"spec":{"resourceAttributes":{"namespace":"` + ns + `","verb":"create","group":"apps","resource":"deployments"}}`
	}},
	"authorization.k8s.io/selfsubjectrulesreviews": {fields: func(ns, _ string) string { return `"spec":{"namespace":"` + ns + `"}` }},
	"authorization.k8s.io/subjectaccessreviews": {fields: func(ns, _ string) string {
		return `"spec":{"user":"alice","groups":["system:masters"],"resourceAttributes":{"namespace":"` + ns + `","verb":"get","resource":"pods"}}`
	}},

	"autoscaling/horizontalpodautoscalers": static(`"spec":{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"wcf"},"minReplicas":1,"maxReplicas":3}`),

	"batch/cronjobs": static(`"spec":{"schedule":"*/5 * * * *","jobTemplate":{"spec":{"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"busybox:1.36"}]}}}}}`),
	"batch/jobs":     static(`"spec":{"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"c","image":"busybox:1.36"}]}}}`),

	"certificates.k8s.io/certificatesigningrequests": {fields: func(string, string) string {
		return `"spec":{"request":"` + csrPEM() + `","signerName":"example.com/wcf","usages":["digital signature"]}`
	}},

	"networking.k8s.io/ingressclasses":  static(`"spec":{"controller":"example.com/wcf"}`),
	"networking.k8s.io/ingresses":       static(`"spec":{"defaultBackend":{"service":{"name":"wcf","port":{"number":80}}}}`),
	"networking.k8s.io/ipaddresses":     {fields: ipAddress, name: ipName},
	"networking.k8s.io/networkpolicies": static(`"spec":{"podSelector":{}}`),
	"networking.k8s.io/servicecidrs":    {fields: serviceCIDR},

	"policy/poddisruptionbudgets": static(`"spec":{"minAvailable":1,"selector":{"matchLabels":{"app":"wcf"}}}`),

	"rbac.authorization.k8s.io/clusterrolebindings": static(`"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"view"},"subjects":[{"kind":"User","name":"alice","apiGroup":"rbac.authorization.k8s.io"}]`),
	"rbac.authorization.k8s.io/clusterroles":        static(`"rules":[{"apiGroups":[""],"resources":["pods"],"verbs":["get"]}]`),
	"rbac.authorization.k8s.io/rolebindings":        static(`"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"ClusterRole","name":"view"},"subjects":[{"kind":"User","name":"alice","apiGroup":"rbac.authorization.k8s.io"}]`),
	"rbac.authorization.k8s.io/roles":               static(`"rules":[{"apiGroups":[""],"resources":["pods"],"verbs":["get"]}]`),

	"storage.k8s.io/csidrivers":           static(`"spec":{}`),
	"storage.k8s.io/csinodes":             static(`"spec":{"drivers":[]}`),
	"storage.k8s.io/csistoragecapacities": static(`"storageClassName":"wcf"`),
	"storage.k8s.io/storageclasses":       static(`"provisioner":"example.com/wcf"`),
	"storage.k8s.io/volumeattachments":    static(`"spec":{"attacher":"wcf.example.com","nodeName":"wcf","source":{"persistentVolumeName":"wcf"}}`),

	"admissionregistration.k8s.io/mutatingwebhookconfigurations":     static(`"webhooks":[]`),
	"admissionregistration.k8s.io/validatingwebhookconfigurations":   static(`"webhooks":[]`),
	"admissionregistration.k8s.io/validatingadmissionpolicies":       static(`"spec":{"matchConstraints":{"resourceRules":[{"apiGroups":[""],"apiVersions":["v1"],"operations":["CREATE"],"resources":["configmaps"]}]},"validations":[{"expression":"true"}]}`),
	"admissionregistration.k8s.io/validatingadmissionpolicybindings": static(`"spec":{"policyName":"wcf","validationActions":["Deny"]}`),

	"apiextensions.k8s.io/customresourcedefinitions": {fields: crd, name: func(b string) string { return crdPlural(b) + ".conformance.example.com" }},

	"scheduling.k8s.io/priorityclasses":                        static(`"value":1000`),
	"coordination.k8s.io/leases":                               static(`"spec":{"holderIdentity":"wcf"}`),
	"node.k8s.io/runtimeclasses":                               static(`"handler":"runc"`),
	"discovery.k8s.io/endpointslices":                          static(`"addressType":"IPv4","endpoints":[{"addresses":["10.0.0.1"]}],"ports":[{"port":80}]`),
	"flowcontrol.apiserver.k8s.io/flowschemas":                 static(`"spec":{"priorityLevelConfiguration":{"name":"global-default"},"matchingPrecedence":9000}`),
	"flowcontrol.apiserver.k8s.io/prioritylevelconfigurations": static(`"spec":{"type":"Limited","limited":{"nominalConcurrencyShares":5,"limitResponse":{"type":"Reject"}}}`),
}

// sharedStorage names the resources stored as another one (the same
// objects through another group or version): their cases are played
// after that one's, on the same goroutine, since each sees the other's
// objects.
var sharedStorage = map[string]string{
	"autoscaling/v1 horizontalpodautoscalers": "autoscaling/v2 horizontalpodautoscalers",
	"events.k8s.io/v1 events":                 "v1 events",
}

// namespaceOf is the namespace of r's objects: the harness's, but for the
// resources the admission of other resources reads (a LimitRange's
// defaults, a ResourceQuota's counts), which have namespaces of their own.
func namespaceOf(r Resource, ns string) string {
	switch r.Name {
	case "limitranges", "resourcequotas":
		return ns + "-" + r.Name
	}
	return ns
}

// fixtureFor returns r's fixture (ok false when the harness has none:
// the resource is not created).
func fixtureFor(r Resource) (fixture, bool) {
	key := r.Name
	if r.Group != "" {
		key = r.Group + "/" + r.Name
	}
	f, ok := fixtures[key]
	if ok && r.Group == "autoscaling" && r.Version == "v1" {
		f = static(`"spec":{"scaleTargetRef":{"apiVersion":"apps/v1","kind":"Deployment","name":"wcf"},"minReplicas":1,"maxReplicas":3,"targetCPUUtilizationPercentage":50}`)
		f.name = func(b string) string { return "v1-" + b }
	}
	return f, ok
}

// objectName is the name base stands for among r's objects.
func (f fixture) objectName(base string) string {
	if f.name != nil {
		return f.name(base)
	}
	return base
}

// object is the JSON of an object of r named name (or, with
// generateName, generated from it) in namespace ns, labelled with Label
// and extra labels.
func (f fixture) object(r Resource, ns, name string, generate bool, labels map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"apiVersion":%q,"kind":%q,"metadata":{`, r.GroupVersion(), r.Kind)
	if generate {
		fmt.Fprintf(&b, `"generateName":%q`, name)
	} else {
		fmt.Fprintf(&b, `"name":%q`, name)
	}
	fmt.Fprintf(&b, `,"labels":{%q:"1"`, Label)
	for _, k := range sortedKeys(labels) {
		fmt.Fprintf(&b, `,%q:%q`, k, labels[k])
	}
	b.WriteString("}}")
	if fields := f.fields(ns, name); fields != "" {
		b.WriteString(",")
		b.WriteString(fields)
	}
	b.WriteString("}")
	return b.String()
}

func coreEvent(ns, _ string) string {
	return `"involvedObject":{"kind":"Pod","namespace":"` + ns + `","name":"p"},"reason":"Checked","message":"m","type":"Normal","source":{"component":"wcf"}`
}

func apiService(_, name string) string {
	group := strings.TrimPrefix(name, "v1.")
	return `"spec":{"group":"` + group + `","version":"v1","groupPriorityMinimum":1000,"versionPriority":15}`
}

// ipNames gives each base name of an IPAddress an address of the service
// range of testkit/k8stest's apiserver (10.96.0.0/16), far from what it
// allocates.
var (
	ipMu    sync.Mutex
	ipNames = map[string]string{}
)

func ipName(base string) string {
	ipMu.Lock()
	defer ipMu.Unlock()
	if n, ok := ipNames[base]; ok {
		return n
	}
	n := fmt.Sprintf("10.96.250.%d", len(ipNames)+1)
	ipNames[base] = n
	return n
}

func ipAddress(ns, _ string) string {
	return `"spec":{"parentRef":{"resource":"services","namespace":"` + ns + `","name":"wcf"}}`
}

// serviceCIDR gives each ServiceCIDR a range of its own.
func serviceCIDR(_, name string) string {
	var n int
	for _, c := range name {
		n = (n*31 + int(c)) % 250
	}
	return fmt.Sprintf(`"spec":{"cidrs":["10.%d.0.0/24"]}`, 100+n%100)
}

// crdPlural is the plural of the custom resource a CRD base name defines
// (letters only, as a resource name must be a DNS label).
func crdPlural(base string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(base) {
		if c >= 'a' && c <= 'z' {
			b.WriteRune(c)
		}
	}
	return b.String() + "s"
}

func crd(_, name string) string {
	plural, group, _ := strings.Cut(name, ".")
	kind := strings.ToUpper(plural[:1]) + strings.TrimSuffix(plural[1:], "s")
	return `"spec":{"group":"` + group + `","scope":"Namespaced","names":{"plural":"` + plural + `","singular":"` +
		strings.TrimSuffix(plural, "s") + `","kind":"` + kind + `","listKind":"` + kind + `List"},"versions":[{"name":"v1","served":true,"storage":true,` +
		`"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}`
}

// csrPEM is a certificate signing request, base64'd PEM, made once.
var csrPEM = sync.OnceValue(func() string {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "wcf"}}, key)
	if err != nil {
		panic(err)
	}
	return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der}))
})
