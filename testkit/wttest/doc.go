// Package wttest holds test helpers shared by wtrace's packages. Its main
// job is the secrets grep: CheckNoSecrets fails a test when a session file
// holds a credential or a Secret value that redaction should have removed.
//
// The needles are the bearer token of the corpus captures (CorpusToken)
// and every Secret value of the corpus captures in testdata/corpus
// (multi-watch, tls-h2), found by recording them once per test binary with
// redaction off (capture.Options.KeepSecrets) and decoding the Secret
// objects they carry: each value as it appears in JSON (base64 for data,
// plain for stringData) and decoded. Values shorter than MinNeedle bytes are
// left out (they would match unrelated bytes). Tests add their own values.
//
// Everything here is for tests: it reads whole bodies into memory.
package wttest
