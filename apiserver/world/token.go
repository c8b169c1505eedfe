package world

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// A ServiceAccount's token subresource (TokenRequest, POST
// …/serviceaccounts/NAME/token), as kube-apiserver v1.33's TokenREST
// answers it (pkg/registry/core/serviceaccount/storage/token.go): a
// signed JWT with its claims (sub, aud, exp, iat, nbf, jti, and
// kubernetes.io's namespace, service account and bound object), its
// expiration in the status. The world signs with a key of its own
// (ES256): a client that reads the token's claims reads what the
// apiserver would have put there; one that verifies it against the
// cluster's keys fails, as with a replay it should. A token review
// (reviews.go) authenticates the tokens the world issued.

// apiAudience is the audience a token request that names none gets: the
// apiserver's API audiences, its service-account issuer's by default
// (kubeadm's, and testkit/k8stest's).
const apiAudience = "https://kubernetes.default.svc.cluster.local"

// Token lifetimes (ValidateTokenRequest; the request's default).
const (
	minTokenSeconds     = 600
	maxTokenSeconds     = 1 << 32
	defaultTokenSeconds = 3600
)

var tokenRequestGVK = authenticationv1.SchemeGroupVersion.WithKind("TokenRequest")

// issued is a token the world issued: what a review of it says.
type issued struct {
	user      authenticationv1.UserInfo
	audiences []string
	expires   time.Time
}

// tokenREST is a ServiceAccount's token subresource.
type tokenREST struct{}

func (tokenREST) serves(info Info, _ policy) bool {
	return info.Resource.Group == "" && info.Resource.Resource == "serviceaccounts"
}

func (tokenREST) createNamed(s *Store, c *call) *Response {
	in, err := readWrite(c, "CreateOptions", tokenRequestGVK)
	if err != nil {
		return s.fail(c, err)
	}
	req, ok := in.obj.(*authenticationv1.TokenRequest)
	if !ok {
		return s.fail(c, apierrors.NewBadRequest(fmt.Sprintf("not a TokenRequest: %T", in.obj)))
	}
	if req.Spec.ExpirationSeconds == nil {
		n := int64(defaultTokenSeconds)
		req.Spec.ExpirationSeconds = &n
	}
	if mgr, err := fieldManager(tokenRequestGVK, "token"); err == nil {
		in.obj = mgr.UpdateNoErrors(newObject(tokenRequestGVK), req, in.p.manager)
		req = in.obj.(*authenticationv1.TokenRequest)
		fixManagedTimes(newObject(tokenRequestGVK), req, s.timeNow())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out, err := s.issue(c, req)
	if err != nil {
		return s.fail(c, err)
	}
	return withWarnings(s.respondObject(c.r, Info{Resource: Resource{Group: "authentication.k8s.io", Version: "v1", Resource: "tokenrequests"},
		Kind: "TokenRequest", Namespaced: true}, http.StatusCreated, out, c.how, false), in.warnings)
}

// issue makes the token a request asks for (the lock is held).
func (s *Store) issue(c *call, req *authenticationv1.TokenRequest) (*authenticationv1.TokenRequest, error) {
	name, ns := c.t.Name, c.t.Namespace
	gk := tokenRequestGVK.GroupKind()
	if req.Name != "" && req.Name != name {
		return nil, apierrors.NewInvalid(gk, name, field.ErrorList{field.Invalid(field.NewPath("metadata").Child("name"), req.Name, "must match the service account name if specified")})
	}
	if req.Namespace != "" && req.Namespace != ns {
		return nil, apierrors.NewInvalid(gk, name, field.ErrorList{field.Invalid(field.NewPath("metadata").Child("namespace"), req.Namespace, "must match the service account namespace if specified")})
	}
	sa, ok := s.objectAt(Resource{Version: "v1", Resource: "serviceaccounts"}, Key{ns, name}).(*corev1.ServiceAccount)
	if !ok {
		return nil, apierrors.NewNotFound(corev1.Resource("serviceaccounts"), name)
	}
	if len(req.Spec.Audiences) == 0 {
		req.Spec.Audiences = []string{apiAudience}
	}
	req.Name, req.Namespace = sa.Name, sa.Namespace
	now := s.now()
	req.CreationTimestamp = metav1.NewTime(now)
	req.Status = authenticationv1.TokenRequestStatus{}
	exp := *req.Spec.ExpirationSeconds
	if exp < minTokenSeconds || exp > maxTokenSeconds {
		msg := "may not specify a duration less than 10 minutes"
		if exp > maxTokenSeconds {
			msg = "may not specify a duration larger than 2^32 seconds"
		}
		return nil, apierrors.NewInvalid(gk, "", field.ErrorList{field.Invalid(field.NewPath("spec").Child("expirationSeconds"), exp, msg)})
	}
	claims := map[string]any{"namespace": sa.Namespace, "serviceaccount": map[string]string{"name": sa.Name, "uid": string(sa.UID)}}
	user := authenticationv1.UserInfo{Username: "system:serviceaccount:" + sa.Namespace + ":" + sa.Name, UID: string(sa.UID),
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + sa.Namespace, "system:authenticated"},
		Extra:  map[string]authenticationv1.ExtraValue{}}
	if ref := req.Spec.BoundObjectRef; ref != nil {
		if err := s.bindToken(ref, sa, claims, &user); err != nil {
			return nil, err
		}
	}
	jti := s.newUID()
	user.Extra["authentication.kubernetes.io/credential-id"] = authenticationv1.ExtraValue{"JTI=" + jti}
	expires := now.Add(time.Duration(exp) * time.Second)
	tok, err := s.sign(map[string]any{"aud": req.Spec.Audiences, "exp": expires.Unix(), "iat": now.Unix(), "nbf": now.Unix(),
		"iss": apiAudience, "jti": jti, "kubernetes.io": claims, "sub": user.Username})
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("failed to generate token: %v", err))
	}
	if s.tokens == nil {
		s.tokens = map[string]issued{}
	}
	s.tokens[tok] = issued{user: user, audiences: req.Spec.Audiences, expires: expires}
	out := req.DeepCopy()
	out.Status = authenticationv1.TokenRequestStatus{Token: tok, ExpirationTimestamp: metav1.NewTime(expires)}
	out.SetGroupVersionKind(tokenRequestGVK)
	return out, nil
}

// bindToken checks a token's bound object (a Pod of the account, a
// Secret, a Node) and adds it to the claims and the user's extra.
func (s *Store) bindToken(ref *authenticationv1.BoundObjectReference, sa *corev1.ServiceAccount, claims map[string]any, user *authenticationv1.UserInfo) error {
	gvk := schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind)
	var uid types.UID
	switch {
	case gvk.Group == "" && gvk.Kind == "Pod":
		pod, ok := s.objectAt(Resource{Version: "v1", Resource: "pods"}, Key{sa.Namespace, ref.Name}).(*corev1.Pod)
		if !ok {
			return apierrors.NewNotFound(corev1.Resource("pods"), ref.Name)
		}
		if sa.Name != pod.Spec.ServiceAccountName {
			return apierrors.NewBadRequest(fmt.Sprintf("cannot bind token for serviceaccount %q to pod running with different serviceaccount name.", sa.Name))
		}
		uid = pod.UID
		claims["pod"] = map[string]string{"name": pod.Name, "uid": string(pod.UID)}
		user.Extra["authentication.kubernetes.io/pod-name"] = authenticationv1.ExtraValue{pod.Name}
		user.Extra["authentication.kubernetes.io/pod-uid"] = authenticationv1.ExtraValue{string(pod.UID)}
		if n := pod.Spec.NodeName; n != "" {
			node, _ := s.objectAt(Resource{Version: "v1", Resource: "nodes"}, Key{"", n}).(*corev1.Node)
			nodeUID := ""
			if node != nil {
				nodeUID = string(node.UID)
			}
			claims["node"] = map[string]string{"name": n, "uid": nodeUID}
			user.Extra["authentication.kubernetes.io/node-name"] = authenticationv1.ExtraValue{n}
			if nodeUID != "" {
				user.Extra["authentication.kubernetes.io/node-uid"] = authenticationv1.ExtraValue{nodeUID}
			}
		}
	case gvk.Group == "" && gvk.Kind == "Secret":
		sec, ok := s.objectAt(Resource{Version: "v1", Resource: "secrets"}, Key{sa.Namespace, ref.Name}).(*corev1.Secret)
		if !ok {
			return apierrors.NewNotFound(corev1.Resource("secrets"), ref.Name)
		}
		uid = sec.UID
		claims["secret"] = map[string]string{"name": sec.Name, "uid": string(sec.UID)}
	case gvk.Group == "" && gvk.Kind == "Node":
		node, ok := s.objectAt(Resource{Version: "v1", Resource: "nodes"}, Key{"", ref.Name}).(*corev1.Node)
		if !ok {
			return apierrors.NewNotFound(corev1.Resource("nodes"), ref.Name)
		}
		uid = node.UID
		claims["node"] = map[string]string{"name": node.Name, "uid": string(node.UID)}
	default:
		return apierrors.NewBadRequest(fmt.Sprintf("cannot bind token to object of type %s", gvk.String()))
	}
	if ref.UID != "" && uid != ref.UID {
		return apierrors.NewConflict(schema.GroupResource{Group: gvk.Group, Resource: gvk.Kind}, ref.Name,
			fmt.Errorf("the UID in the bound object reference (%s) does not match the UID in record. The object might have been deleted and then recreated", ref.UID))
	}
	return nil
}

// objectAt decodes the current version of an object, nil when there is
// none (the lock is held).
func (s *Store) objectAt(r Resource, k Key) any {
	h, ok := s.hist(r)
	if !ok {
		return nil
	}
	e := s.current(h, k)
	if e == nil {
		return nil
	}
	obj, err := s.decodeEntry(e)
	if err != nil {
		return nil
	}
	return obj
}

// sign makes a compact JWS (ES256) of claims with the store's key.
func (s *Store) sign(claims map[string]any) (string, error) {
	if s.tokenKey == nil {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return "", err
		}
		s.tokenKey = k
	}
	kid := sha256.Sum256(elliptic.MarshalCompressed(elliptic.P256(), s.tokenKey.X, s.tokenKey.Y))
	head, err := json.Marshal(map[string]string{"alg": "ES256", "kid": base64.RawURLEncoding.EncodeToString(kid[:])})
	if err != nil {
		return "", err
	}
	body, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	signed := base64.RawURLEncoding.EncodeToString(head) + "." + base64.RawURLEncoding.EncodeToString(body)
	sum := sha256.Sum256([]byte(signed))
	r, sv, err := ecdsa.Sign(rand.Reader, s.tokenKey, sum[:])
	if err != nil {
		return "", err
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	sv.FillBytes(sig[32:])
	return signed + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

// tokenStatus reviews a token (the lock is held): one the world issued,
// not expired and for one of the audiences asked (or the API's), is
// authenticated as its account; any other is not, as the apiserver says
// of a token it did not sign.
func (s *Store) tokenStatus(spec authenticationv1.TokenReviewSpec) authenticationv1.TokenReviewStatus {
	t, ok := s.tokens[spec.Token]
	if !ok || !s.now().Before(t.expires) {
		return authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
	}
	want := spec.Audiences
	if len(want) == 0 {
		want = []string{apiAudience}
	}
	var auds []string
	for _, a := range want {
		if matches(t.audiences, a, "") {
			auds = append(auds, a)
		}
	}
	if len(auds) == 0 {
		// The union of the apiserver's authenticators: its bearer-token
		// file's, then the service accounts'.
		q := func(v []string) string {
			b, _ := json.Marshal(v)
			return string(b)
		}
		return authenticationv1.TokenReviewStatus{Error: fmt.Sprintf("[invalid bearer token, token audiences %s is invalid for the target audiences %s]", q(t.audiences), q(want))}
	}
	return authenticationv1.TokenReviewStatus{Authenticated: true, User: t.user, Audiences: auds}
}
