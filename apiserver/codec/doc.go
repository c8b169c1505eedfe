// Package codec turns Kubernetes objects between the encodings a client
// may ask for, the way kube-apiserver (v1.33) does: JSON, YAML and
// protobuf for built-in kinds; Table and PartialObjectMetadata(List)
// transformations; watch events; Status errors. CBOR (what the apiserver
// serves with its CBORServingAndStorage gate) is decoded and encoded, but
// not negotiated.
//
// # Objects
//
// An Object is one object's bytes with their format, apiVersion and kind:
// JSON text (with or without its kind and apiVersion members, as list items
// carry it) or a protobuf object message (the inside of the "k8s\x00" +
// runtime.Unknown envelope). Decode gives a typed object for every kind of
// k8s.io/api (Scheme), a *unstructured.Unstructured for JSON of any other
// kind; Encode goes back. Built-in kinds round-trip byte for byte through
// Decode and Encode, since both sides use apimachinery's serializers as
// the apiserver does. CBOR objects (the object's map, self-described)
// decode to typed or unstructured objects and encode with apimachinery's
// CBOR serializer, as the apiserver's; they round-trip as objects, not
// byte for byte (the apiserver writes a Go map's keys, Secret data or
// labels, in map order, so its own bytes are not twice alike).
//
// # Negotiation
//
// Negotiate reads an Accept header as the apiserver's
// negotiation.NegotiateMediaTypeOptions does (github.com/munnerz/goautoneg
// clauses in preference order; the first one a serializer and the endpoint
// allow wins; an empty header means JSON) and returns a Media: the format,
// and an optional transformation (as=Table, as=PartialObjectMetadata,
// as=PartialObjectMetadataList; g=meta.k8s.io, v=v1 or v1beta1). Protobuf
// is offered only for built-in kinds, as for custom resources; Table only
// in JSON and YAML; a watch only in JSON and protobuf. CBOR is not offered
// (v1.33's default: the gate is off); a caller that holds CBOR bytes
// decides itself whether a client takes them as they are (package replay
// does). Nothing acceptable is a 406 NotAcceptable Status worded like the
// apiserver's.
//
// # Responses
//
// Writer encodes what a handler answers — one object, a list, a watch
// event, a Status — in a Media. When no transformation is asked for and the
// object is already in the wanted format, its bytes go out unchanged
// (Transcoded says whether they did not). Tables use the columns and
// cells of kube-apiserver v1.33's printers (pkg/printers/internalversion,
// ported over the v1 types in table*.go, one file per API group; the
// aggregator's for APIService), with their descriptions as v1.33 words
// them, for the kinds whose storage prints with them; other kinds (custom
// resources, Roles, LimitRanges, CSIStorageCapacities) get the default
// Name / Created At columns, as for resources without printers. A list
// printer's order is kept (FlowSchemas by matching precedence). Age cells
// are computed against the Writer's Now. A watch of Tables carries the
// column definitions in its first event only, as the apiserver's does.
// EndBookmark is a streaming list's last bookmark, with the list blueprint
// annotation v1.33 adds.
//
// # Concurrency
//
// Package functions are safe for concurrent use. A Writer holds per-stream
// state (whether the Table headers went out) and is not.
package codec
