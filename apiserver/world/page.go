package world

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/wtrace/wtrace/apiserver/codec"
)

// Pagination of a LIST (limit, continue), as kube-apiserver's storage
// pages one (k8s.io/apiserver/pkg/storage: continue.go, etcd3's
// GetList): a page holds the first limit objects of the scope in key
// order; when more remain, its continue token names the resourceVersion
// the list was read at and the key after the page's last object, and
// remainingItemCount how many remain (without selectors only: a selector
// is evaluated after the storage counts). The next page is the same
// snapshot, read at that resourceVersion; a token older than the world
// holds is 410 Expired.

// continueToken is the storage's token (a public API struct), base64url
// JSON.
type continueToken struct {
	APIVersion      string `json:"v"`
	ResourceVersion int64  `json:"rv"`
	StartKey        string `json:"start"`
}

// Texts of the storage's errors.
const (
	errContinueInvalid   = "continue key is not valid"
	errContinueRV        = "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)"
	errContinueEmptyKey  = "continue key is not valid: encoded start key empty (version meta.k8s.io/v1)"
	errContinueVersion   = "continue key is not valid: server does not recognize this encoded version"
	continueExpired      = "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter."
	continueRVNotAllowed = "specifying resource version is not allowed when using continue"
)

// listPage is the part of a LIST a request asks for.
type listPage struct {
	limit int64
	start string // the key after which the page begins ("" from the first)
	rv    uint64 // the resourceVersion of a continued list (0: none)
}

// parsePage reads a LIST's limit and continue parameters.
func parsePage(r *Request) (listPage, error) {
	var p listPage
	if v := r.Query.Get("limit"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err == nil && n > 0 {
			p.limit = n
		}
	}
	c := r.Query.Get("continue")
	if c == "" {
		return p, nil
	}
	if rv := r.Query.Get("resourceVersion"); rv != "" && rv != "0" {
		return p, apierrors.NewBadRequest(continueRVNotAllowed)
	}
	tok, err := decodeContinue(c)
	if err != nil {
		return p, apierrors.NewBadRequest(fmt.Sprintf("invalid continue token: %v", err))
	}
	p.start = tok.StartKey
	if tok.ResourceVersion > 0 {
		p.rv = uint64(tok.ResourceVersion)
	}
	return p, nil
}

func decodeContinue(c string) (continueToken, error) {
	var tok continueToken
	data, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return tok, fmt.Errorf("%s: %v", errContinueInvalid, err)
	}
	if err := json.Unmarshal(data, &tok); err != nil {
		return tok, fmt.Errorf("%s: %v", errContinueInvalid, err)
	}
	switch {
	case tok.APIVersion != "meta.k8s.io/v1":
		return tok, fmt.Errorf("%s %v", errContinueVersion, tok.APIVersion)
	case tok.ResourceVersion == 0:
		return tok, fmt.Errorf("%s", errContinueRV)
	case tok.StartKey == "":
		return tok, fmt.Errorf("%s", errContinueEmptyKey)
	}
	key := tok.StartKey
	if !strings.HasPrefix(key, "/") {
		key = "/" + key
	}
	if path.Clean(key) != key {
		return tok, fmt.Errorf("%s: %v", errContinueInvalid, tok.StartKey)
	}
	tok.StartKey = key
	return tok, nil
}

// pageKey is an object's key below its list's prefix, as the storage's
// tokens name it: /NAME in a namespace's (or a cluster-scoped) list,
// /NAMESPACE/NAME in one of every namespace.
func pageKey(t Target, o codec.Object) (string, error) {
	obj, err := codec.Decode(o)
	if err != nil {
		return "", err
	}
	m, err := metaOf(obj)
	if err != nil {
		return "", err
	}
	if t.Namespace == "" && m.GetNamespace() != "" {
		return "/" + m.GetNamespace() + "/" + m.GetName(), nil
	}
	return "/" + m.GetName(), nil
}

// cut returns the page p of items (the scope's objects in key order,
// read at resourceVersion at) and its list metadata; selected says that a
// selector chose them (no remainingItemCount).
func (p listPage) cut(t Target, items []codec.Object, at uint64, selected bool) ([]codec.Object, codec.ListMeta, error) {
	lm := codec.ListMeta{ResourceVersion: formatRV(at)}
	if p.start != "" {
		i := 0
		for ; i < len(items); i++ {
			k, err := pageKey(t, items[i])
			if err != nil {
				return nil, lm, err
			}
			if k >= p.start {
				break
			}
		}
		items = items[i:]
	}
	if p.limit == 0 || int64(len(items)) <= p.limit {
		return items, lm, nil
	}
	last, err := pageKey(t, items[p.limit-1])
	if err != nil {
		return nil, lm, err
	}
	b, err := json.Marshal(continueToken{APIVersion: "meta.k8s.io/v1", ResourceVersion: int64(at), StartKey: last + "\x00"})
	if err != nil {
		return nil, lm, err
	}
	lm.Continue = base64.RawURLEncoding.EncodeToString(b)
	if !selected {
		n := int64(len(items)) - p.limit
		lm.RemainingItemCount = &n
	}
	return items[:p.limit], lm, nil
}
