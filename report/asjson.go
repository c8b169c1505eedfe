package report

import (
	"fmt"

	"github.com/wtrace/wtrace/apiserver/codec"
	"github.com/wtrace/wtrace/frame"
)

// A protobuf or CBOR event or body is shown as the bytes it is (a dump)
// and as the JSON the apiserver would have sent for it, which
// apiserver/codec, the owner of how an object is encoded for a client,
// writes: every built-in kind of client-go's scheme, meta.k8s.io's Table
// and PartialObjectMetadata. What it cannot decode is shown as bytes only.

// jsonWriter writes JSON answers (a codec.Writer is not safe for
// concurrent use: one per builder).
func jsonWriter() *codec.Writer {
	return codec.NewWriter(codec.Media{Format: frame.JSON}, codec.TableOptions{}, nil)
}

// eventJSON is the JSON of a protobuf or CBOR event of type typ, nil if
// it cannot be decoded.
func eventJSON(w *codec.Writer, f frame.Format, typ string, data []byte) (j []byte) {
	defer recoverMalformed(&j)
	apiVersion, kind, obj, err := frame.EventObject(f, data)
	if err != nil {
		return nil
	}
	j, err = w.Event(typ, codec.Object{Format: f, APIVersion: apiVersion, Kind: kind, Raw: obj})
	if err != nil {
		return nil
	}
	return j
}

// bodyJSON is the JSON of a whole protobuf or CBOR body, nil if it cannot
// be decoded.
func bodyJSON(w *codec.Writer, f frame.Format, body []byte) (j []byte) {
	defer recoverMalformed(&j)
	o, err := codec.FromBody(f, body)
	if err != nil {
		return nil
	}
	j, err = w.Object(o)
	if err != nil {
		return nil
	}
	return j
}

// peekBody reads the metadata of the object a whole body holds (a
// write's answer), through codec.FromBody: JSON text, a protobuf
// envelope, a CBOR item.
func peekBody(f frame.Format, body []byte) (m frame.Meta, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("report: malformed body: %v", r)
		}
	}()
	o, err := codec.FromBody(f, body)
	if err != nil {
		return m, err
	}
	return frame.PeekObject(f, o.APIVersion, o.Kind, o.Raw)
}

// recoverMalformed turns a panic of generated protobuf code on recorded
// (untrusted) bytes into "cannot be decoded".
func recoverMalformed(j *[]byte) {
	if r := recover(); r != nil {
		*j = nil
	}
}
