// Package world is a replayed session's view of the world: every object
// the recording shows, at every resourceVersion, and what the replay's
// clients wrote. It answers what the recording cannot — writes, reads the
// clients make with other parameters, watches of other scopes — as
// kube-apiserver v1.33 would.
//
//	st, _ := world.Load(f, world.Options{})   // one pass over the session
//	resp, ok := st.Serve(&state.Request{Method: "PATCH", Path: p, Query: q, Header: h, Body: b})
//	w, refused := st.Watch(req)               // a watch the store serves itself
//
// # The history
//
// Load reads every recorded LIST (all pages of a paginated one), GET,
// watch event and answer to a write, JSON, protobuf or CBOR, into one history
// per resource: each version of each object with its resourceVersion and
// capture time, once per resourceVersion (keeping the other format too
// when both were recorded). A complete LIST also shows deletions: an
// object of its scope it leaves out is gone at its resourceVersion (a
// label or field selector's scope is evaluated on the last version seen).
// A DELETED event of a selector-scoped watch is taken as a deletion, as
// nothing tells it from an object leaving the scope — unless another view
// of the same resourceVersion (a watch without a selector, a LIST, a GET)
// shows the object still there. A watch captured from its middle (no
// request) counts as the watch its events show (MidstreamTarget). Load
// with Options.Until reads only what the session shows before a capture
// time: the world as it was then.
//
// The world's point is the newest recorded resourceVersion served to any
// client (Observe, which the replay calls for every recorded event, LIST
// and object it serves; it starts at the session's first LIST or watch).
// Reads and writes happen there: a GET, a LIST, a write see the newest
// version of each object at the point, the clients' earlier writes
// included. Clients of one Server share one world, as clients of one
// apiserver do. A recorded change after a client's write of the same
// object is the world's truth and wins: the history orders them by
// resourceVersion, and the recorded one comes later.
//
// # resourceVersions
//
// Every client sees resourceVersions only grow, and a watch resumes from
// any one the replay served. A write gets the next number after everything
// served so far. Recorded resourceVersions go out as recorded while there
// is room for the writes between them — real clusters have it, since
// etcd's revisions count every write of the cluster, not only the
// recorded ones. When there is none (a recording of one busy resource),
// every recorded resourceVersion above the point is served shifted up by
// as much as needed: Observe returns the number to serve instead (no
// client was served one above the point yet, and a number once served
// never changes), Recorded maps a served number back. ObserveN and
// ServedN are the numeric forms the replay calls for every recorded event
// it sends: while the point is past the number and nothing below it was
// shifted, they take no lock.
//
// # Writes
//
// Create (201; uid, creationTimestamp, generateName completed as the
// apiserver does, generation 1 for the kinds that track it; 409
// AlreadyExists), update (200, or 201 for the kinds that create on update;
// 409 Conflict on a stale resourceVersion; 404; 422 without a
// resourceVersion for the kinds that require one), JSON patch, JSON merge
// patch, strategic merge patch (built-in kinds, with k8s.io/api's Go types
// as the schema), server-side apply, delete (finalizers and a Pod's grace
// period leave the object with its deletionTimestamp; a foreground or
// orphan propagation policy adds the garbage collector's finalizer; the
// last finalizer removed deletes it), delete-collection, the status and
// scale subresources, a Pod's binding (pods/NAME/binding and the
// deprecated bindings resource: spec.nodeName, the PodScheduled
// condition; 409 for a Pod already bound), a Pod's eviction (at once for
// a Pod that disrupts nothing, else as its PodDisruptionBudget allows:
// 429, or its budget's status counting the disruption; the
// DisruptionTarget condition, then the deletion), a ServiceAccount's tokens
// (TokenRequest: a JWT with the apiserver's claims, signed by the world),
// the reviews (access and rules reviews answered by an authorizer that
// allows system:masters, and a replay's own client, everything, and
// others what the world's RBAC objects grant; token reviews of the tokens
// it issued), dryRun=All (answered, not stored), preconditions. An
// update that changes nothing keeps the resourceVersion. metadata.managedFields
// is kept by apimachinery's field manager, the one the apiserver runs,
// with client-go's schemas for built-in kinds and deduced ones for others;
// server-side apply is that field manager's: applied fields land, owners
// and conflicts (409 unless force) are tracked. Status bodies use
// apimachinery's errors and the apiserver's wording; a test compares them
// with a real kube-apiserver's.
//
// What kube-apiserver adds to objects is modelled for the kinds controllers
// create most: the decoder's defaults of Pods, Deployments, ReplicaSets and
// the pod templates of workloads (containers, probes, volumes); the
// admission plugins NamespaceLifecycle (no new content in a terminating
// namespace, 404 for a namespace the world knows is missing, the immortal
// namespaces), ServiceAccount (the account, its token volume), Priority and
// DefaultTolerationSeconds; a Service's defaults and allocations (its
// cluster IP from the world's service range, with its IPAddress object,
// node ports, IP families; service.go); field validation (fieldValidation Strict, Warn,
// Ignore: unknown and duplicate fields of built-in kinds); the registries'
// status strategies (the object as sent but its spec) and a Namespace's
// life (the first DELETE starts its termination, the finalize subresource
// ends it); CustomResourceDefinitions and APIServices as kube-apiserver's
// in-process servers keep them (their modules' types, defaults and apply
// schemas, the validation of their names, their strategies), with the
// controllers it runs on them: a CRD's naming and establishing (its
// status written as kube-apiserver's right after each change), its
// deletion (the cleanup finalizer, its custom resources deleted), a local
// APIService Available at once (crd.go, crd_delete.go, apiservice.go);
// /apis lists their groups (ServedExtensions); the APF configuration
// controller's Dangling condition on FlowSchemas (apf.go); the
// registries' own ways where the harness found them (a CSR stamped with
// its requestor, Options.User, with the spec and status reset fields;
// a ReplicationController's delete orphaning; the namespace registry's
// precondition words; an IPAddress's name generator; a new PVC's first
// update a write, etcd holding no phase until then: csr.go, etcd.go);
// Events' and CRDs' watches served as etcd serves them (noWatchCache:
// from before the session, what the session shows since). Not modelled: other
// admission (quotas, webhooks, policies),
// defaulting and validation of other kinds,
// controllers (nothing is garbage-collected, no Pod is scheduled), custom
// resources' schemas (they are taken to have a status subresource and no
// unconditional updates, as structural CRDs commonly are).
//
// # A world for a run (Live)
//
// Options.Live loads the session as the environment of a run of clients
// under test: what those clients did is left out, the rest held back and
// applied change by change (ApplyNext), objects they created paired with
// the run's (by resource, namespace, generateName, owners, and what
// identifies them: package internal/ident) — see Environment and the doc
// of env.go and live.go. WritesBehind says how far the run's clients are
// in the writes the recording shows before the next change, Awaits
// whether the next change waits for an object they have not created yet
// (follow.go): what a replay paced by quiet waits for.
// A DELETED seen only through a selector's watch is applied as the
// object's deletion unless the session shows the same object (its uid)
// again later: then it only left the selector's scope (kube-apiserver
// sends both as a DELETED of the object as it last was in scope).
//
// # Compaction
//
// The store forgets old versions as the apiserver's etcd and watch cache
// do: it keeps each object's current version and the newest
// Options.HistoryWindow others (DefaultHistoryWindow), and forgets the rest
// once it holds twice as many; when a write would take it past
// Options.MaxBytes, it first forgets every old version. A watch from a
// forgotten resourceVersion, one left behind by compaction (its next event
// is an ERROR), and an Exact LIST of one get 410 Expired. A read-only
// replay's recorded future is never forgotten.
//
// # Reads and watches
//
// Serve answers GET of an object (its status or scale too) and LIST with
// any namespace, labelSelector (labels.Parse) and fieldSelector
// (metadata.name, metadata.namespace and each built-in kind's selectable
// fields, valued as the apiserver's GetAttrs; others refused with its
// messages), at the point, or with resourceVersionMatch=Exact at the
// resourceVersion asked for; paginated (limit and continue) as the
// apiserver's storage pages them: each page of one snapshot, its continue
// token the resourceVersion it was read at and the key after its last
// object (page.go).
//
// Watch serves a watch from the history: from "" or "0" (ADDED events of
// the current state), from a resourceVersion (the changes after it; an
// older one than the session holds gets an ERROR event with a 410 Expired
// Status), or a streaming list (ADDED events, then the initial-events-end
// bookmark). Changes are filtered by the watch's scope as the apiserver's
// watch cache does (an object entering a selector's scope is ADDED,
// leaving it DELETED). Request.RecordedOnly leaves the clients' writes out
// of a watch (a replay whose watchers see only the recording); Wrote says
// whether clients wrote objects of a resource at all. The caller paces recorded changes by their capture
// time and takes clients' writes at once (Store.Changed says when one
// lands).
//
// # Encodings
//
// Every answer is encoded as the client's Accept header asks
// (package codec): JSON, YAML, protobuf, Table, PartialObjectMetadata.
// An object in the format recorded goes out as recorded (with a shifted
// resourceVersion rewritten); Response.Transcoded says when it does not.
//
// # Code
//
// Each path of a resource is answered by an endpoint (rest.go), as
// kube-apiserver answers each through a REST storage of its own: the
// resource itself (objectREST: its collection and its objects) and one
// small type per subresource beside it (statusREST, scaleREST in
// scale.go, finalizeREST, bindingREST in binding.go, tokenREST in
// token.go, evictionREST in eviction.go; ephemeralContainersREST, resizeREST
// and approvalREST in podsub.go, which change one part of a Pod or a
// CertificateSigningRequest and keep the rest), and the resources answered without storage (reviewREST in
// reviews.go, the legacy bindings), each implementing the verbs it
// serves. The verbs' shared steps are by verb: create.go,
// update.go (PUT), patch.go, delete.go, read.go; write.go holds what every
// write shares (its parameters, its body, the commit).
//
// # One resource, several versions
//
// Core v1 Events and events.k8s.io/v1 Events, autoscaling/v1 and
// autoscaling/v2 HorizontalPodAutoscalers are each one storage, as in
// kube-apiserver: one history (keyed by the storage's resource), its
// entries in the version they were shown in, converted on every read,
// watch and write through the other (versions.go), so each version lists,
// watches and deletes the other's objects with one uid and one
// resourceVersion sequence.
//
// # Memory and concurrency
//
// The store holds every version of every object the session shows (object
// bytes, not decoded objects), bounded by Options.MaxBytes. A Store is safe
// for concurrent use: one lock, held while a request reads or changes the
// history, never while the caller writes to a client. A Watch is not; it
// takes the lock for each step.
package world
