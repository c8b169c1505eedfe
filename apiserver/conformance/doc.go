// Package conformance measures a world replay against kube-apiserver: it
// enumerates the built-in API from a real apiserver's discovery (every
// group, version, resource and subresource with its verbs), generates
// requests for each verb (create with generateName, dryRun and field
// validation; get; list with selectors, limit and continue,
// resourceVersion and resourceVersionMatch; watch from a resourceVersion,
// with bookmarks, as a streaming list, from an expired version; update;
// the four patch types and apply; every subresource; delete with
// preconditions, propagation policies, grace periods and finalizers;
// deletecollection; the create-only reviews), plays them against the real
// apiserver and against a replay of a session seeded with the same
// objects, and compares the answers after normalizing only what
// legitimately differs: uids, timestamps, resourceVersion numbers,
// generated names, signed tokens, the Go values error messages print (of
// kube-apiserver's internal types: compared by type name), and, for
// resources kube-apiserver's own controllers write behind a client's
// write (CustomResourceDefinitions, APIServices, FlowSchemas), the interleaving of watch events
// across objects (compared per object, in order).
//
// The result is a coverage table (Table, rendered as docs/COVERAGE.md):
// for each resource and subresource, each verb the apiserver serves is
// "same", "differs" (naming the requests whose answers differ and where),
// "not served" (the replay answers 404 or 405 where the apiserver does
// not), or an exception with its reason (exec, attach, portforward,
// proxy and log need a kubelet). A case whose answer depends on what a
// session of LISTs cannot hold is run but not compared, and listed with
// its reason (Case.NotCompared). TestConformance runs it against the
// binaries of testkit/k8stest and compares the table with
// docs/COVERAGE.md (but for the per-case details of a differing cell,
// which races inside the apiserver change); -update regenerates it.
//
// A test-only package: nothing in the wtrace binary imports it.
package conformance
