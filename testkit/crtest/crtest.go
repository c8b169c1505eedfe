// Package crtest is a small operator built on sigs.k8s.io/controller-runtime
// — a manager with its cache, client, event recorder and leader election
// on (the default of every operator scaffold) — for tests that record it
// against a real apiserver and replay its session to it.
//
// It mirrors ConfigMaps: for every ConfigMap labelled
// crtest.wtrace.dev/mirror=true in its namespace it keeps a ConfigMap
// NAME-mirror with the same data, owned by the source, and an annotation
// counting the source's generation of data it copied; when the source is
// gone it deletes the mirror itself (no garbage collector runs in the
// tests). Everything here is for tests; nothing in the wtrace binary
// imports it.
package crtest

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Label marks the ConfigMaps the operator mirrors.
const Label = "crtest.wtrace.dev/mirror"

// LeaseName is the operator's leader election lock.
const LeaseName = "crtest-leader"

// UserAgent is the operator's User-Agent.
const UserAgent = "crtest-operator/v0.1 (linux/amd64) controller-runtime"

// Operator is a running manager.
type Operator struct {
	mgr    manager.Manager
	cancel context.CancelFunc
	done   chan error
}

// Start starts the operator against the apiserver of cfg, watching
// namespace ns, with leader election in ns. Stop it with Stop.
func Start(cfg *rest.Config, ns string) (*Operator, error) {
	c := rest.CopyConfig(cfg)
	c.UserAgent = UserAgent
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	mgr, err := manager.New(c, manager.Options{
		Scheme:                  scheme,
		LeaderElection:          true,
		LeaderElectionID:        LeaseName,
		LeaderElectionNamespace: ns,
		LeaseDuration:           ptr(4 * time.Second),
		RenewDeadline:           ptr(3 * time.Second),
		RetryPeriod:             ptr(time.Second),
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		Cache:                   cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}}},
	})
	if err != nil {
		return nil, err
	}
	r := &mirror{c: mgr.GetClient(), rec: mgr.GetEventRecorderFor("crtest-operator")}
	err = builder.ControllerManagedBy(mgr).
		For(&corev1.ConfigMap{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetLabels()[Label] == "true" || metav1.GetControllerOf(o) != nil
		}))).
		Named("mirror").
		// Each test may start the operator more than once in a process.
		WithOptions(controller.Options{SkipNameValidation: ptr(true)}).
		Complete(r)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	op := &Operator{mgr: mgr, cancel: cancel, done: make(chan error, 1)}
	go func() { op.done <- mgr.Start(ctx) }()
	return op, nil
}

// Elected is closed once the operator leads (its lease acquired).
func (o *Operator) Elected() <-chan struct{} { return o.mgr.Elected() }

// Stop stops the manager and waits for it.
func (o *Operator) Stop() error {
	o.cancel()
	select {
	case err := <-o.done:
		if errors.Is(err, context.Canceled) {
			return nil
		}
		return err
	case <-time.After(30 * time.Second):
		return errors.New("crtest: the manager did not stop within 30 s")
	}
}

// mirror is the reconciler.
type mirror struct {
	c   client.Client
	rec interface {
		Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any)
	}
}

func (m *mirror) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	// A mirror's event: reconcile its source.
	name := req.Name
	if n := len(name) - len("-mirror"); n > 0 && name[n:] == "-mirror" {
		name = name[:n]
	}
	var src corev1.ConfigMap
	err := m.c.Get(ctx, types.NamespacedName{Namespace: req.Namespace, Name: name}, &src)
	gone := apierrors.IsNotFound(err) || err == nil && (src.Labels[Label] != "true" || src.DeletionTimestamp != nil)
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	dst := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: req.Namespace, Name: name + "-mirror"}}
	if gone {
		if err := m.c.Delete(ctx, dst); err != nil && !apierrors.IsNotFound(err) {
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, nil
	}
	op, err := controllerutil.CreateOrUpdate(ctx, m.c, dst, func() error {
		dst.Data = src.Data
		if dst.Annotations == nil {
			dst.Annotations = map[string]string{}
		}
		dst.Annotations["crtest.wtrace.dev/keys"] = fmt.Sprint(len(src.Data))
		return controllerutil.SetControllerReference(&src, dst, m.c.Scheme())
	})
	if err != nil {
		return reconcile.Result{}, err
	}
	if op != controllerutil.OperationResultNone {
		m.rec.Eventf(&src, corev1.EventTypeNormal, "Mirrored", "mirror %s %s", dst.Name, op)
	}
	return reconcile.Result{}, nil
}

func ptr[T any](v T) *T { return &v }
