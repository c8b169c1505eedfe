// Package formats defines the wtrace session model (record.go) and the .wt
// session file that stores it: a Writer that appends records, a streaming
// Reader, a File that reads through the index, and Recover.
//
// File.Events reads a session's watch events with what the session says
// about each (connection, request, peeked metadata); EventEncoder writes
// them in the events line format of `wtrace events`, a stable interface
// (events.go).
//
// # File layout
//
// A .wt file (FORMAT.md specifies every byte) is a 16-byte header, then
// data blocks, then at Close an index block and a 32-byte footer:
//
//	header | block 0 | block 1 | … | index block | footer
//
// Each block is self-delimiting: a 48-byte header with a magic, lengths,
// record count, time range, the CRC32-C of the payload and a CRC32-C of the
// header itself, then a zstd-compressed payload of records. The Writer never
// seeks or rewrites: each block goes out in one Write, so a file whose
// writer was killed is readable up to its last complete block.
//
// Format version 2 (version 1 files read as before) adds the session
// dictionary (dict.go): once the session's records reach
// WriterOptions.DictSize (1 MiB), every later block is compressed with
// those first records as a zstd dictionary, and its header (56 bytes)
// names the dictionary's length and CRC. The dictionary is also stored
// whole in dictionary blocks (type 3): one right after the blocks it is
// taken from, one per DictCopyEvery (128 MiB) of records, and one at Close
// after 32 MiB. Readers take it from the first blocks or any intact copy
// (File and Recover search the whole file for one), so damage to any one
// block costs only that block's records.
//
// Format version 3 (written since; versions 1 and 2 read as before) writes
// records into data blocks of type 4, in which each record's capture time
// is the varint of its difference from the record's before it in the
// block (FORMAT.md §5.1), a few bytes where versions 1 and 2 store eight;
// every block says by its type how its times are stored, so a reader needs
// the file's version for nothing else. Record bodies in the index keep
// their times absolute.
//
// # Damage
//
// Readers check every length read from a file against MaxBlockSize,
// MaxRecordSize or MaxIndexSize before allocating, and every block against
// its checksums before decompressing it. A cut file is a *DamageError
// wrapping io.ErrUnexpectedEOF; a checksum mismatch a *DamageError naming
// the block and its offset. After damage, readers resume at the next offset
// holding a block header whose checksum checks out (unless
// ReaderOptions.StopOnDamage). Blocks are numbered in their headers:
// readers drop a block whose number they read already (a byte range copied
// twice) and report numbers that are missing or out of order. A damaged
// file magic is damage, not ErrNotSession, when the rest of the header or
// the first block vouches for the file. Open rebuilds a missing or damaged
// index by reading every block; Recover writes a clean copy of what is
// intact, each block once.
//
// # Compatibility
//
// A reader skips record types, block types and index entry types it does
// not know, and ignores bytes after the fields it knows in a record, so
// later versions can add all of these without changing Version. Empty byte
// slices, lists and maps are read back as nil.
//
// # Memory and concurrency
//
// The Writer holds one pending block (and a few queued for compression),
// the session dictionary (1 MiB) and the index: the connections and
// exchanges still open as values, and each finished one as its encoded
// index entry, compressed (a few tens of bytes for a small exchange; see
// spill.go), so a recording's memory follows what is open rather than its
// history. The Reader holds one block, and the first blocks' records and
// the last dictionary block read for the session dictionary (at most
// MaxDictSize each). A File holds its index, a
// cache of decompressed blocks (64 MiB at most) shared by its
// exchange Scanners, and once a block needs it the session dictionary.
// Writer, Reader and Scanner are not safe for concurrent use; a File is,
// by any number of Scanners.
package formats
