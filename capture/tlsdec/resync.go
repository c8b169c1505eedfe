package tlsdec

import (
	"crypto/aes"
	"encoding/binary"
	"fmt"
)

// Resynchronisation limits (see Conn.Gap).
const (
	// maxResyncRecords caps the sequence numbers tried for one candidate
	// record past the one the direction expected: the records that may
	// have been lost, all of them when the gap's size is unknown.
	maxResyncRecords = 1 << 16
	// maxResyncScan bounds the bytes skipped after a gap while looking for
	// a record that authenticates: four of the largest records. The first
	// record that starts after the gap starts within one record of it.
	// Records damaged in place (no byte missing) are not bounded so: a
	// burst of damage may span many records, and every byte of it is
	// there to be scanned, at the cost of a header check per byte (the
	// trial decryptions stay bounded by maxResyncWork and the credit).
	maxResyncScan = 4 * (5 + MaxCiphertext12)
	// maxChainUpdate bounds the sequence numbers tried under the keys
	// after a KeyUpdate for a record found by following the chain of
	// record lengths through records damaged in place: a KeyUpdate among
	// the last maxChainUpdate damaged records is found.
	maxChainUpdate = 8
	// estimateSpan is the sequence numbers tried on each side of the
	// estimate of the records lost (the bytes skipped over the
	// direction's average record), before the rounds of try.
	estimateSpan = 16
	// maxResyncWork bounds the work of the trial decryptions after a gap,
	// in ciphertext bytes plus resyncTryCost per trial: the CPU a resync
	// may cost, a few tens of milliseconds. The record that ends a resync
	// costs one trial per record lost before it (enough for over a
	// thousand 16 KiB records); a false candidate may cost up to
	// maxResyncRecords trials per key generation.
	maxResyncWork = 32 << 20
	// resyncTryCost is the work charged per trial on top of the record's
	// length, its fixed cost: small candidates are not cheap to try.
	resyncTryCost = 1 << 10
	// resyncPeekCost is the work charged for a TLS 1.3 trial that one
	// block of keystream refutes (keys.plausible13), whatever the
	// record's length: a quarter of a full trial's fixed cost, so that a
	// resync that cannot succeed (keys two KeyUpdates ahead) still ends
	// at the work bound.
	resyncPeekCost = 256
	// A direction starts with maxResyncWork of credit for trial
	// decryptions, earns resyncCreditPerByte per byte fed and saves at
	// most maxResyncCredit: however many gaps there are, resyncs cost at
	// most 16 times the decryption of what was captured, plus the start.
	resyncCreditPerByte = 16
	maxResyncCredit     = 4 * maxResyncWork
)

// resync is the state of a direction looking for its next record after a
// gap. Its bytes are buffered in a window; the window's first byte is the
// next candidate record header.
type resync struct {
	keys  *keys  // the keys in use at the gap
	next  uint64 // the sequence number the direction would have used next
	upd   *keys  // TLS 1.3: the keys after a KeyUpdate, derived at the first need
	v13   bool   // TLS 1.3 (no alert candidates; KeyUpdate)
	minCT int    // the suite's shortest record body
	maxCT int    // the version's longest record body
	cbc   bool   // record bodies are whole AES blocks

	win        *recBuf // the bytes fed since the gap and not skipped: win[start:end]
	start, end int

	gapOff  int64 // stream offset of the first gap
	from    int64 // stream offset just after the last gap
	lost    int64 // bytes lost in the gaps; -1 if unknown
	gaps    int   // Gap calls since the last record
	skipped int64 // bytes fed since the first gap and skipped
	scanned int64 // bytes skipped since the last gap: bounded by maxResyncScan
	work    int64 // trial decryption work since the last gap: bounded by maxResyncWork
	note    int   // index of the gap's note in Conn.notes; -1 if not kept

	// A resync after records damaged in place (not after a gap).
	inPlace bool
	t       int64  // capture time of the last piece fed
	badRec  int64  // the first damaged record's number
	why     string // what was wrong with it
	// The chain of record lengths from the damaged record on: no byte is
	// missing, so a header whose length was not damaged tells where the
	// next record starts, and which sequence number it has. chainAt is the
	// stream offset of the next header the chain predicts (-1: the chain
	// broke, at a header damaged too, or after a gap), chainK the records
	// from the damaged one to it.
	chainAt int64
	chainK  uint64
}

// resyncKeys returns the keys of h if a gap in h can be resynchronised:
// the application keys are in use (TLS 1.3 after the direction's Finished,
// TLS 1.2 after its ChangeCipherSpec), known, and nothing failed or is
// held. Otherwise it returns nil.
func (c *Conn) resyncKeys(h *half) *keys {
	if h.lost || h.failed || len(h.pendRecs) > 0 || c.suite == nil {
		return nil
	}
	switch c.version {
	case versionTLS13:
		if h.phase == phaseApp && !h.trial {
			return c.keys13(h)
		}
	case versionTLS12:
		if h.ccs {
			return c.keys12(h)
		}
	}
	return nil
}

// startResync puts h, whose keys k are in use, into resync mode after a
// gap of n bytes (n < 0: unknown) at h.off. The record in progress and a
// handshake message in progress are dropped.
func (c *Conn) startResync(h *half, k *keys, n int) {
	s := c.suite
	rs := &resync{keys: k, next: k.seq, v13: s.v13, minCT: s.minCiphertext(), maxCT: MaxCiphertext12,
		cbc: s.bulk == bulkAESCBC, gapOff: h.off, lost: int64(n), gaps: 1, chainAt: -1}
	if s.v13 {
		rs.maxCT = MaxCiphertext13
	}
	if n < 0 {
		rs.lost = -1
	}
	h.hdrN = 0
	c.releaseBufs(h)
	h.hs = hsReader{}
	h.rs = rs
	rs.note = c.setNote(-1, "%s; resynchronizing", rs.gapText(h.dir))
}

// gapAgain adds a gap of n bytes to h's resync. The bytes fed since the
// previous gap cannot complete a record across this one: they are skipped,
// and the scan bounds start afresh.
func (c *Conn) gapAgain(h *half, n int) {
	rs := h.rs
	rs.skip(h, rs.end-rs.start)
	rs.gaps++
	if n < 0 || rs.lost < 0 {
		rs.lost = -1
	} else {
		rs.lost += int64(n)
	}
	rs.scanned, rs.work = 0, 0
	rs.chainAt = -1 // bytes are missing: the chain of lengths is broken
	c.setNote(rs.note, "%s; resynchronizing", rs.gapText(h.dir))
}

// resyncInPlace starts a resync of h from the record numbered no at
// stream offset off, which did not authenticate (h.bad says why) although
// no byte of it is missing: bytes were damaged in place. pieces are the
// bytes from off on that were fed (the record, the rest of the Feed call):
// they are scanned again from the record's start, since a damaged header
// may have given it a wrong length, and an intact record whose sequence
// number is off (a record before it was taken for another type) opens
// with the next one. It returns the first error of what follows.
func (c *Conn) resyncInPlace(h *half, no, off int64, pieces [][]byte, t int64) error {
	why := h.bad
	h.bad = ""
	k := c.resyncKeys(h)
	body := h.body // a piece may alias it: keep it until they are fed
	h.body = nil
	h.off = off
	c.startResync(h, k, 0)
	rs := h.rs
	rs.inPlace, rs.badRec, rs.why, rs.gaps, rs.from = true, no, why, 0, off
	rs.chainAt, rs.chainK = off, 0
	h.stats.Damaged++
	c.setNote(rs.note, "%s; resynchronizing", rs.gapText(h.dir))
	var first error
	for _, p := range pieces {
		var err error
		if h.rs != nil {
			err = c.feedResync(h, p, t)
		} else {
			err = c.parse(h, p, t)
		}
		if first == nil {
			first = err
		}
	}
	if body != nil {
		bufPool.Put(body)
	}
	return first
}

// resyncRecord resynchronizes h from record r (body), which did not
// authenticate, and the rest p of the Feed call. Its number is counted
// again, as lost, when the resync finds the next record.
func (c *Conn) resyncRecord(h *half, r rec, body, p []byte, t int64) error {
	h.recNo--
	h.stats.Records--
	return c.resyncInPlace(h, r.no, r.off, [][]byte{r.hdr[:], body, p}, t)
}

// gapText describes the gaps of a resync, for a note.
func (rs *resync) gapText(dir Direction) string {
	what := "bytes lost"
	if rs.lost >= 0 {
		what = fmt.Sprintf("%d bytes lost", rs.lost)
	}
	if rs.inPlace {
		s := fmt.Sprintf("%s: record %d at offset %d did not authenticate (%s; bytes damaged in place)", dir, rs.badRec, rs.gapOff, rs.why)
		if rs.gaps > 0 {
			s += fmt.Sprintf(", then %s in %d %s", what, rs.gaps, plural(int64(rs.gaps), "gap"))
		}
		return s
	}
	if rs.gaps > 1 {
		return fmt.Sprintf("%s: %s in %d gaps from offset %d", dir, what, rs.gaps, rs.gapOff)
	}
	return fmt.Sprintf("%s: %s at offset %d", dir, what, rs.gapOff)
}

// skip drops the first n bytes of the window: they are not the start of a
// record that authenticates.
func (rs *resync) skip(h *half, n int) {
	rs.start += n
	if rs.start == rs.end {
		rs.start, rs.end = 0, 0
	}
	rs.skipped += int64(n)
	rs.scanned += int64(n)
	h.stats.Lost += int64(n)
	h.stats.ResyncSkipped += int64(n)
}

// feedResync consumes p, the next bytes of h while it resynchronises. Once
// a record authenticates, it and the bytes after it are processed as usual.
func (c *Conn) feedResync(h *half, p []byte, t int64) error {
	rs := h.rs
	if rs.win == nil {
		rs.win = bufPool.Get().(*recBuf)
	}
	for len(p) > 0 {
		if rs.start > 0 && len(rs.win)-rs.end < len(p) {
			rs.end = copy(rs.win[:], rs.win[rs.start:rs.end])
			rs.start = 0
		}
		// The window holds the largest record with its header: compacted,
		// it has room for more of a candidate, so every pass takes some
		// of p, and a candidate is tried as soon as it is complete.
		n := copy(rs.win[rs.end:], p)
		rs.end += n
		h.off += int64(n)
		p = p[n:]
		rs.t = t
		if m := c.scan(h); m > 0 {
			return c.resynced(h, m, p, t)
		}
		if h.rs == nil {
			// Given up: the rest is only counted, as for a lost direction.
			h.off += int64(len(p))
			return nil
		}
	}
	return nil
}

// scan skips what cannot start a record at the start of h's window and
// tries the candidates. It returns the length of the record that
// authenticated, now at the start of the window, or 0 when it needs more
// bytes or gave up (h.rs is nil).
//
// After records damaged in place, a candidate where the chain of record
// lengths predicts a header is tried with the one sequence number the
// chain gives it (and, TLS 1.3, after a KeyUpdate among the last damaged
// records); if it does not authenticate it is damaged too, and the chain
// goes on past it: a burst of damaged records costs a trial or a few per
// record, not a sweep of sequence numbers each.
func (c *Conn) scan(h *half) int {
	rs := h.rs
	for rs.start < rs.end {
		if rs.scanned > maxResyncScan && !(rs.inPlace && rs.gaps == 0) {
			c.giveUp(h, fmt.Sprintf("no record authenticated in the %d bytes after offset %d", rs.scanned, rs.from))
			return 0
		}
		w := rs.win[rs.start:rs.end]
		at := h.off - int64(len(w)) // stream offset of w[0]
		onChain := rs.chainAt == at
		if onChain && !rs.header(w[:min(5, len(w))]) {
			rs.chainAt = -1 // a header damaged too: the chain breaks here
			onChain = false
		}
		if !onChain {
			i := rs.candidate(w)
			if rs.chainAt > at && int64(i) > rs.chainAt-at {
				i = int(rs.chainAt - at) // stop where the chain goes on
			}
			if i > 0 {
				rs.skip(h, i)
				continue
			}
		}
		if len(w) < 5 {
			return 0
		}
		m := 5 + int(binary.BigEndian.Uint16(w[3:5]))
		if len(w) < m {
			return 0
		}
		if onChain {
			if c.tryChain(h, w[:m]) {
				return m
			}
			if h.rs == nil {
				return 0
			}
			// Damaged too: the next record starts after it. Its bytes are
			// still scanned, in case its length was damaged.
			rs.chainAt += int64(m)
			rs.chainK++
			rs.scanned = 0
			rs.skip(h, 1)
			continue
		}
		if follows(w[m:]) && c.try(h, w[:m]) {
			return m
		}
		if h.rs == nil {
			return 0
		}
		rs.skip(h, 1)
	}
	return 0
}

// tryChain trial-decrypts the record r that the chain of record lengths
// puts at rs.chainK records after the damaged one: under the keys in use
// with its sequence number, and, for TLS 1.3, under the next keys from 0,
// in case a KeyUpdate was among the last maxChainUpdate damaged records.
func (c *Conn) tryChain(h *half, r []byte) bool {
	rs := h.rs
	hdr, body := [5]byte(r[:5]), r[5:]
	dst := bufPool.Get().(*recBuf)
	defer bufPool.Put(dst)
	if s := rs.next + rs.chainK; c.tryOpen(h, rs.keys, s, &hdr, body, dst[:]) {
		return c.matched(h, rs.keys, s, false)
	}
	if k := c.updatedKeys(h); k != nil {
		if s, ok := c.trySeqs(h, k, &hdr, body, dst[:], 0, min(rs.chainK, maxChainUpdate)); ok {
			return c.matched(h, k, s, true)
		}
	}
	return false
}

// candidate returns the index of the first byte of w that may start a
// candidate record (the header may be cut by the end of w), or len(w).
func (rs *resync) candidate(w []byte) int {
	for i := range w {
		if rs.header(w[i:min(i+5, len(w))]) {
			return i
		}
	}
	return len(w)
}

// header reports whether p, 1 to 5 bytes, may begin the header of a record
// of this direction after the handshake: application data (TLS 1.2: or an
// alert), record version 0x0303, and a length the suite can produce, at
// most the version's limit.
func (rs *resync) header(p []byte) bool {
	if p[0] != typeAppData && (rs.v13 || p[0] != typeAlert) {
		return false
	}
	if len(p) > 1 && p[1] != 3 || len(p) > 2 && p[2] != 3 {
		return false
	}
	if len(p) < 5 {
		return true
	}
	n := int(binary.BigEndian.Uint16(p[3:5]))
	return n >= rs.minCT && n <= rs.maxCT && (!rs.cbc || n%aes.BlockSize == 0)
}

// follows reports whether p, the bytes fed after a candidate record, may
// begin the next record: a content type and version 0x0303. It spares the
// trial decryptions of most false candidates; bytes not fed yet are not
// waited for.
func follows(p []byte) bool {
	if len(p) > 0 && (p[0] < typeCCS || p[0] > typeHeartbeat) {
		return false
	}
	return !(len(p) > 1 && p[1] != 3 || len(p) > 2 && p[2] != 3)
}

// tries is the number of sequence numbers tried after the expected one:
// every record that may start in the bytes lost and skipped since the gap,
// plus the one the gap cut.
func (rs *resync) tries() uint64 {
	if rs.lost < 0 {
		return maxResyncRecords
	}
	return min(uint64(rs.lost+rs.skipped)/uint64(5+rs.minCT)+2, maxResyncRecords)
}

// firstResyncRound is the number of sequence numbers tried per key
// generation in the first round of try; each round tries four times more.
const firstResyncRound = 8

// try trial-decrypts the candidate record r (header and body) under the
// sequence numbers a record after the gap may have and, for TLS 1.3, under
// the next keys from sequence number 0, in case a KeyUpdate was lost. The
// two are tried in rounds of growing bounds, so a lost KeyUpdate costs
// about as much as the records lost, even when the gap's size is unknown.
// If one authenticates, h's keys are set to open r next, the records lost
// are counted, and try reports true. It may give up h (work bound).
func (c *Conn) try(h *half, r []byte) bool {
	rs := h.rs
	hdr, body := [5]byte(r[:5]), r[5:]
	dst := bufPool.Get().(*recBuf)
	defer bufPool.Put(dst)
	n := rs.tries() + 1 // sequence numbers per key generation
	if s, ok := explicitNonce(rs.keys, body); ok && s-rs.next < n && c.tryOpen(h, rs.keys, s, &hdr, body, dst[:]) {
		return c.matched(h, rs.keys, s, false)
	}
	// The records lost are most likely like the last ones before the
	// loss (a burst inside a large list, or among small events), then
	// like the direction's average.
	if lo, hi, ok := c.estimate(h, n, h.recAvg8/8); ok {
		if s, ok := c.trySeqs(h, rs.keys, &hdr, body, dst[:], rs.next+lo, hi-lo); ok {
			return c.matched(h, rs.keys, s, false)
		}
	}
	if h.stats.Records > 0 {
		if lo, hi, ok := c.estimate(h, n, h.stats.Bytes/h.stats.Records); ok {
			if s, ok := c.trySeqs(h, rs.keys, &hdr, body, dst[:], rs.next+lo, hi-lo); ok {
				return c.matched(h, rs.keys, s, false)
			}
		}
	}
	for lo, hi := uint64(0), min(firstResyncRound, n); lo < hi && h.rs != nil; lo, hi = hi, min(4*hi, n) {
		if s, ok := c.trySeqs(h, rs.keys, &hdr, body, dst[:], rs.next+lo, hi-lo); ok {
			return c.matched(h, rs.keys, s, false)
		}
		if k := c.updatedKeys(h); k != nil {
			if s, ok := c.trySeqs(h, k, &hdr, body, dst[:], lo, hi-lo); ok {
				return c.matched(h, k, s, true)
			}
		}
	}
	return false
}

// estimate returns the sequence numbers, from rs.next, worth trying first
// for a candidate: estimateSpan on each side of the bytes lost and skipped
// over avg, a record length the direction's records had, within [0, n).
// ok is false when there is nothing to go by or the span starts where the
// rounds of try begin anyway.
func (c *Conn) estimate(h *half, n uint64, avg int64) (lo, hi uint64, ok bool) {
	rs := h.rs
	if rs.lost < 0 || avg <= 0 {
		return 0, 0, false
	}
	est := uint64((rs.lost + rs.skipped) / avg)
	if est <= firstResyncRound+estimateSpan {
		return 0, 0, false
	}
	lo, hi = est-estimateSpan, min(est+estimateSpan+1, n)
	return lo, hi, lo < hi
}

// noteRecord adds a record of n bytes to the moving average (recAvg8).
func (h *half) noteRecord(n int) {
	if h.recAvg8 == 0 {
		h.recAvg8 = 8 * int64(n)
		return
	}
	h.recAvg8 += int64(n) - h.recAvg8/8
}

// explicitNonce returns the explicit nonce of a TLS 1.2 AES-GCM record:
// senders set it to the sequence number, the first one to try.
func explicitNonce(k *keys, body []byte) (uint64, bool) {
	if k.s.v13 || k.s.bulk != bulkAESGCM || len(body) < 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(body[:8]), true
}

// updatedKeys returns, for TLS 1.3, the keys after a KeyUpdate of the keys
// in use at the gap, derived at the first need; nil for TLS 1.2 or after
// h gave up.
func (c *Conn) updatedKeys(h *half) *keys {
	rs := h.rs
	if rs == nil || !rs.v13 {
		return nil
	}
	if rs.upd == nil {
		k, err := rs.keys.next()
		if err != nil {
			return nil
		}
		rs.upd = k
	}
	return rs.upd
}

// matched sets k to open the record that authenticated with sequence
// number seq next and counts the records lost; update says k are the keys
// after a lost KeyUpdate. It returns true.
func (c *Conn) matched(h *half, k *keys, seq uint64, update bool) bool {
	rs := h.rs
	k.seq = seq
	n := int64(seq - rs.next)
	if update {
		// RFC 8446 §4.6.3: the KeyUpdate was the last record under the
		// old keys; how many came before it is unknown.
		h.cur = k
		h.stats.KeyUpdates++
		n = int64(seq) + 1
	}
	h.recNo += n
	h.stats.LostRecords += n
	h.stats.Resyncs++
	at := h.off - int64(rs.end-rs.start)
	lost := fmt.Sprintf("%d %s lost", n, plural(n, "record"))
	if update {
		lost = fmt.Sprintf("at least %d %s lost, a KeyUpdate among them", n, plural(n, "record"))
	}
	c.setNote(rs.note, "%s; resynchronized at offset %d: skipped %d bytes, %s",
		rs.gapText(h.dir), at, rs.skipped, lost)
	if rs.inPlace {
		over := int64(5 + c.suite.minCiphertext())
		c.lost(Loss{Dir: h.dir, Record: rs.badRec, Offset: rs.gapOff, Why: rs.why, Records: n,
			Skipped: rs.skipped, Plaintext: max(rs.skipped-n*over, 0), Resumed: at, Time: rs.t})
	}
	return true
}

// lost tells a LossSink about l.
func (c *Conn) lost(l Loss) {
	if ls, ok := c.sink.(LossSink); ok {
		ls.Lost(l)
	}
}

func plural(n int64, s string) string {
	if n == 1 {
		return s
	}
	return s + "s"
}

// trySeqs tries to open the record hdr, body under k with the n sequence
// numbers from from. It returns the one that authenticates, and stops when
// h gives up.
func (c *Conn) trySeqs(h *half, k *keys, hdr *[5]byte, body, dst []byte, from, n uint64) (uint64, bool) {
	for s := from; s-from < n && h.rs != nil; s++ {
		if c.tryOpen(h, k, s, hdr, body, dst) {
			return s, true
		}
	}
	return 0, false
}

// tryOpen reports whether the record hdr, body authenticates under k with
// sequence number seq, decrypting into dst; k.seq is left as it was. Once
// the work bound is reached it gives up h instead.
func (c *Conn) tryOpen(h *half, k *keys, seq uint64, hdr *[5]byte, body, dst []byte) bool {
	rs := h.rs
	if !k.plausible13(seq, body) {
		// One block of keystream said no (TLS 1.3): a wrong sequence
		// number costs that block, not the record.
		rs.work += resyncPeekCost
		h.credit -= resyncPeekCost
		if rs.work > maxResyncWork || h.credit < 0 {
			c.giveUp(h, "trial decryption limit reached")
		}
		return false
	}
	cost := int64(len(body)) + resyncTryCost
	rs.work += cost
	h.credit -= cost
	if rs.work > maxResyncWork || h.credit < 0 {
		c.giveUp(h, "trial decryption limit reached")
		return false
	}
	saved := k.seq
	k.seq = seq
	var err error
	if k.s.v13 {
		_, err = k.open13(dst, hdr, body)
	} else {
		_, err = k.open12(dst, hdr, body)
	}
	k.seq = saved
	return err == nil
}

// giveUp ends h's resync without success: the direction is lost, as after
// a gap before its application keys.
func (c *Conn) giveUp(h *half, why string) {
	rs := h.rs
	at := h.off - int64(rs.end-rs.start)
	c.setNote(rs.note, "%s; resync failed at offset %d: %s; later records not decrypted", rs.gapText(h.dir), at, why)
	h.lost = true
	h.rs = nil
	if rs.inPlace {
		c.lost(Loss{Dir: h.dir, Record: rs.badRec, Offset: rs.gapOff, Why: rs.why, Records: -1,
			Skipped: rs.skipped, Plaintext: -1, Resumed: -1, Time: rs.t})
	}
	if rs.win != nil {
		bufPool.Put(rs.win)
	}
}

// resynced resumes h with the record that authenticated, the first m bytes
// of the window, then processes the rest of the window and p as usual.
func (c *Conn) resynced(h *half, m int, p []byte, t int64) error {
	rs := h.rs
	win, w := rs.win, rs.win[rs.start:rs.end]
	h.rs = nil
	defer bufPool.Put(win)
	h.recOff = h.off - int64(len(w))
	h.off = h.recOff + int64(m)
	// A record completed by an earlier Feed but held behind a false
	// candidate gets this call's time: only a false candidate delays one.
	r := rec{hdr: [5]byte(w[:5]), no: h.recNo, off: h.recOff, t: t}
	h.recNo++
	h.stats.Records++
	h.noteRecord(m)
	err := c.onRecord(h, &r, w[5:m])
	if perr := c.parse(h, w[m:], t); err == nil {
		err = perr
	}
	if perr := c.parse(h, p, t); err == nil {
		err = perr
	}
	return err
}
