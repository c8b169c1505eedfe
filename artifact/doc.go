// Package artifact ships session files to where they are replayed, at any
// size: as OCI artifacts in a container registry (Push, Pull), or from an
// HTTP(S) URL (Fetch) — what `wtrace push`, `wtrace pull` and `wtrace
// replay oci://…` run, and how the replicas of deploy/ get their session.
//
// # The artifact
//
// A session is pushed as the OCI image specification (v1.1) describes an
// artifact, and as ORAS writes one (`oras push REF session.wt:MEDIATYPE
// --artifact-type ARTIFACTTYPE` makes the same manifest, and `oras pull`
// reads it back as session.wt):
//
//   - an image manifest (application/vnd.oci.image.manifest.v1+json) whose
//     artifactType is ArtifactType;
//   - the empty config (application/vnd.oci.empty.v1+json, the two bytes
//     "{}", embedded as its data);
//   - one layer: the session file as it is, byte for byte (it is
//     compressed already), of media type MediaType, annotated with its
//     file name (org.opencontainers.image.title);
//   - annotations on the manifest: org.opencontainers.image.created (when
//     the session was recorded, so that pushing a file twice gives the
//     same digest) and org.opencontainers.image.description, and what the
//     session says of itself (AnnotationSource, AnnotationRedaction,
//     AnnotationTool, AnnotationEvents).
//
// Pull accepts any manifest with one layer of MediaType (an artifact made
// by another tool, or an image manifest whose config media type is
// ArtifactType, as artifacts were written before the artifactType field).
//
// # Limits, integrity, secrets
//
// A pulled or fetched session is streamed to its file (memory does not
// follow its size), bounded by Options.MaxSize before anything is
// written (the layer's declared size; a fetch's Content-Length, and the
// bytes as they come), checked against the layer's digest as it is read
// (a mismatch is an error and leaves nothing at the path), and checked to
// be a session file. The file is written beside its path and renamed into
// place once complete (package internal/outfile): a failed pull leaves
// what the path held. A manifest larger than maxManifest is refused.
//
// Push refuses a session whose Secret values were kept (wtrace record
// --keep-secrets: Meta.Redaction headers-only) unless
// PushOptions.AllowUnredacted: a registry is shared further than a file.
//
// # Registries
//
// References are parsed as docker and crane parse them
// (registry/repository:tag or @sha256:…; docker.io without a registry).
// Credentials come from Options.Keychain, by default the Docker
// configuration ($DOCKER_CONFIG/config.json, ~/.docker/config.json, as
// `docker login` and `oras login` write it, credential helpers included).
// Registries on loopback or private (RFC 1918) addresses are spoken to
// over plain HTTP, others over HTTPS unless Options.PlainHTTP.
//
// Nothing here is safe for concurrent use on one path; distinct calls are
// independent.
package artifact
