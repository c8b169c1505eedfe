package tlsdec

// Records held: a direction's records wait for the other direction's
// hello, or for the key log's secrets (Options.KeyWait), and go on when
// they can (pump).

// blocked reports whether h must hold its records until the other
// direction's hello is seen: the client after a ClientHello until the
// ServerHello, the server until the ClientHello it answers. Once the other
// direction cannot progress (lost, failed) nothing is held.
func (c *Conn) blocked(h *half) bool {
	if c.finalSH {
		return false
	}
	o := &c.half[1-h.dir]
	if o.lost || o.failed {
		return false
	}
	if h.dir == ClientToServer {
		return c.chCount > c.shCount
	}
	return c.shCount >= c.chCount
}

// waitKeys reports whether h must hold a record of type typ until the key
// log has the secrets it needs (Options.KeyWait): the record is
// encrypted, and the secret of h's phase (TLS 1.3: the handshake secret,
// or with none the application one; then the application one) or the
// master secret (TLS 1.2) is not there yet. Once a phase's lookup was
// made, or nothing can be looked up (no ClientHello, an unsupported
// suite), nothing waits.
func (c *Conn) waitKeys(h *half, typ uint8) bool {
	if !c.opts.KeyWait || c.waitOver || c.keys == nil || !c.haveCR || c.suite == nil || h.failed || h.lost || !c.encrypted(h, typ) {
		return false
	}
	switch c.version {
	case versionTLS13:
		if h.looked {
			return false
		}
		lbl := secretLabels[h.dir]
		if h.phase == phaseApp {
			return c.keys.secret(&c.clientRandom, lbl[2]) == nil
		}
		return c.keys.secret(&c.clientRandom, lbl[1]) == nil && c.keys.secret(&c.clientRandom, lbl[2]) == nil
	case versionTLS12:
		return !c.looked12 && c.keys.secret(&c.clientRandom, labelMaster) == nil
	}
	return false
}

// WaitingKeys reports whether a direction holds records waiting for
// secrets the key log does not have yet (Options.KeyWait).
func (c *Conn) WaitingKeys() bool {
	for d := range c.half {
		h := &c.half[d]
		if len(h.pendRecs) > 0 && !c.blocked(h) && c.waitKeys(h, h.pendRecs[0].hdr[0]) {
			return true
		}
	}
	return false
}

// Retry processes the records held for secrets the key log now has (call
// it after the key log grew); errors are as Feed's.
func (c *Conn) Retry() error {
	return c.pump()
}

// StopWaiting ends Options.KeyWait for the connection: the records held
// for secrets are processed now (what the key log still lacks is noted
// and counted as not decrypted, as without KeyWait), and later ones are
// not held. Errors are as Feed's.
func (c *Conn) StopWaiting() error {
	if c.waitOver {
		return nil
	}
	if c.WaitingKeys() {
		c.note("key log still had no secrets for client random %s when the wait for them ended", c.crHex())
	}
	c.waitOver = true
	return c.pump()
}

// held reports whether h's next record (of type typ) must wait: for the
// other direction's hello, or for its secrets.
func (c *Conn) held(h *half, typ uint8) bool {
	return c.blocked(h) || c.waitKeys(h, typ)
}

// onRecord processes a complete record or holds it.
func (c *Conn) onRecord(h *half, r *rec, body []byte) error {
	if len(h.pendRecs) == 0 && !c.held(h, r.hdr[0]) {
		err := c.process(h, r, body)
		if len(c.half[1-h.dir].pendRecs) > 0 {
			// The record may have been the hello the other side waits for.
			if perr := c.pump(); err == nil {
				err = perr
			}
		}
		return err
	}
	if h.failed {
		h.stats.Undecryptable++
		return nil
	}
	if !c.blocked(h) && len(h.pend)+len(body) > c.opts.MaxKeyWait {
		// Holding for secrets, past the bound: give up waiting.
		c.note("%s: more than %d bytes held waiting for the key log's secrets of client random %s; the wait ended",
			h.dir, c.opts.MaxKeyWait, c.crHex())
		c.waitOver = true
		err := c.pump()
		if len(h.pendRecs) == 0 && !c.blocked(h) {
			if perr := c.process(h, r, body); err == nil {
				err = perr
			}
			return err
		}
	}
	if c.blocked(h) && len(h.pend)+len(body) > c.opts.MaxPending {
		peer := "server"
		if h.dir == ServerToClient {
			peer = "client"
		}
		c.note("%s: more than %d bytes held waiting for the %s's hello; not decrypted",
			h.dir, c.opts.MaxPending, peer)
		h.failed = true
		h.stats.Undecryptable += int64(len(h.pendRecs)) + 1
		h.stats.Pending = 0
		h.pend, h.pendRecs = nil, nil
		return nil
	}
	start := len(h.pend)
	h.pend = append(h.pend, body...)
	h.pendRecs = append(h.pendRecs, pendRec{hdr: r.hdr, start: start, end: len(h.pend), no: r.no, off: r.off, t: r.t})
	h.stats.Pending++
	return nil
}

// pump processes held records of directions that are no longer blocked.
func (c *Conn) pump() error {
	if c.pumping {
		return nil
	}
	c.pumping = true
	defer func() { c.pumping = false }()
	var first error
	for progress := true; progress; {
		progress = false
		for d := range c.half {
			h := &c.half[d]
			for len(h.pendRecs) > 0 && !c.held(h, h.pendRecs[0].hdr[0]) {
				p := h.pendRecs[0]
				h.pendRecs = h.pendRecs[1:]
				h.stats.Pending--
				r := rec{hdr: p.hdr, no: p.no, off: p.off, t: p.t}
				if err := c.process(h, &r, h.pend[p.start:p.end]); err != nil && first == nil {
					first = err
				}
				progress = true
			}
			if len(h.pendRecs) == 0 {
				h.pend, h.pendRecs = nil, nil
			}
		}
	}
	return first
}
