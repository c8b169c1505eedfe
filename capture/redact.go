package capture

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"fmt"
	"io"
	"strings"

	"github.com/wtrace/wtrace/capture/redact"
)

// redactBody redacts a complete Secret body that is content-encoded with
// enc ("" or gzip/deflate): it is decoded (at most maxRedactBody bytes),
// redacted, and encoded again with the same coding.
func redactBody(s *redact.Secrets, ct, enc string, body []byte) ([]byte, []int, error) {
	if enc == "" || strings.EqualFold(enc, "identity") {
		return s.Body(ct, body, true)
	}
	if !supportedEncoding(enc) {
		return nil, nil, fmt.Errorf("Content-Encoding %q cannot be decoded", enc)
	}
	var dec bytes.Buffer
	d := newPushDecoder(enc)
	var werr error
	write := func(q []byte) {
		if dec.Len()+len(q) > maxRedactBody {
			werr = fmt.Errorf("decoded body larger than %d bytes", maxRedactBody)
			return
		}
		dec.Write(q)
	}
	if err := d.write(body, write); err != nil {
		d.abort()
		return nil, nil, err
	}
	if err := d.close(write); err != nil {
		return nil, nil, err
	}
	if werr != nil {
		return nil, nil, werr
	}
	out, lens, err := s.Body(ct, dec.Bytes(), true)
	if err != nil {
		return nil, nil, err
	}
	var enc2 bytes.Buffer
	var zw io.WriteCloser
	if strings.EqualFold(strings.TrimSpace(enc), "deflate") {
		zw = zlib.NewWriter(&enc2)
	} else {
		zw = gzip.NewWriter(&enc2)
	}
	zw.Write(out)
	zw.Close()
	return enc2.Bytes(), lens, nil
}
