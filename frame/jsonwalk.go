package frame

import (
	"errors"
	"fmt"

	"github.com/wtrace/wtrace/internal/jsonscan"
)

// The JSON walker (internal/jsonscan), with errors wrapping ErrInvalid.

func invalid(err error) error {
	var se *jsonscan.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("%w: %v", ErrInvalid, se)
	}
	return err
}

func walkErr(at int, format string, args ...any) error {
	return fmt.Errorf("%w: json at byte %d: %s", ErrInvalid, at, fmt.Sprintf(format, args...))
}

func skipSpace(b []byte, i int) int { return jsonscan.SkipSpace(b, i) }

func keyIs(raw []byte, name string) bool { return jsonscan.KeyIs(raw, name) }

func appendJSONString(b []byte, s string) []byte { return jsonscan.AppendString(b, s) }

func eachMember(b []byte, fn func(key, val []byte, valAt int) bool) error {
	return invalid(jsonscan.EachMember(b, fn))
}

func eachElement(val []byte, fn func(elem []byte, at int) error) error {
	return invalid(jsonscan.EachElement(val, fn))
}

func jsonString(val []byte, at int) (string, error) {
	s, err := jsonscan.String(val, at)
	return s, invalid(err)
}
