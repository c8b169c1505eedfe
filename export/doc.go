// Package export writes a recorded session (a *formats.File) in formats
// other tools read: JSON lines (JSONL, the stable schema of
// docs/SCHEMA.md), a HAR 1.2 log (HAR), a pcap file of synthesized
// packets (Pcap), and the text of `wtrace inspect` (Text). Formats is the
// table of the formats `wtrace export` writes: the command lists them in
// its help and completion, and dispatches from it.
//
// Every exporter keeps the same contract:
//
//   - Streaming. An exporter reads the file once, in file order (HAR reads
//     each body twice, in place), and writes as it reads: its memory is
//     the session's index and one block, plus for each exchange in
//     progress a bounded part of one body (an event, a chunk), however
//     long the session and its watches ran. Nothing is buffered to be
//     written at the end but the closing bracket.
//   - Damage. A damaged region of the file is skipped, never guessed at:
//     the exporter reads on after it (formats.Scanner.NextIntact), and the
//     Result lists every damaged region once, in file order, those the
//     opening of the file found included (formats.Damages): JSONL, HAR
//     and pcap alike. JSONL also writes a "damage" line where its read met
//     the damage. Any other error (writing, a corrupt index) ends the
//     export and is returned.
//   - Notes. Where an export cannot give back exactly what the session
//     holds — a pcap's re-encoded gzip watch body, say — Result.Notes says
//     so, one line each; the command prints them. (The notes of a watch in
//     the schema, its ERROR events and longest silence — WatchError,
//     Silence — are facts of the session, not of the export.)
//   - Secrets. An export holds what the session holds and never adds to
//     it: a redacted header is empty, a redacted value the placeholder the
//     session stores. A session recorded with --keep-secrets holds Secret
//     values as captured, and so does its export; KeepsSecrets tells, the
//     HAR's comment and the JSONL meta line's redaction say so in the
//     export, and the command warns.
//
// The schema's types (Session, Meta, Conn, Exchange, Anomaly, Summary)
// are also what `wtrace inspect --output json`, report and the replay's
// overview print: NewSession, NewExchange and their kin build them from
// the index.
package export
