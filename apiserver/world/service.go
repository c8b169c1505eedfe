package world

import (
	"fmt"
	"math/big"
	"math/rand/v2"
	"net"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
)

// What kube-apiserver v1.33 does to a Service besides storing it: the
// decoder's defaults (SetDefaults_Service: session affinity, type,
// protocols, target ports, traffic policies), then the registry's
// allocations (pkg/registry/core/service/storage/alloc.go) on a
// single-stack IPv4 cluster: the IP family fields, a cluster IP from the
// service range (the world's ServiceCIDR "kubernetes", else kubeadm's
// 10.96.0.0/12) with its IPAddress object, node ports from 30000-32767.
// An update keeps what was allocated when it leaves it out
// (patchAllocatedValues).

// nodePortBase and nodePortSize are the apiserver's default node port
// range (--service-node-port-range 30000-32767).
const nodePortBase, nodePortSize = 30000, 2768

// defaultServiceRange is the service range when the world shows none.
var defaultServiceRange = netip.MustParsePrefix("10.96.0.0/12")

// ipAddresses is the resource of the allocated IPs' objects.
var ipAddresses = Resource{Group: networkingv1.GroupName, Version: "v1", Resource: "ipaddresses"}

// defaultService is SetDefaults_Service.
func defaultService(svc *corev1.Service) {
	sp := &svc.Spec
	if sp.SessionAffinity == "" {
		sp.SessionAffinity = corev1.ServiceAffinityNone
	}
	if sp.SessionAffinity == corev1.ServiceAffinityNone {
		sp.SessionAffinityConfig = nil
	}
	if sp.SessionAffinity == corev1.ServiceAffinityClientIP &&
		(sp.SessionAffinityConfig == nil || sp.SessionAffinityConfig.ClientIP == nil || sp.SessionAffinityConfig.ClientIP.TimeoutSeconds == nil) {
		sp.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr.To(corev1.DefaultClientIPServiceAffinitySeconds)}}
	}
	if sp.Type == "" {
		sp.Type = corev1.ServiceTypeClusterIP
	}
	for i := range sp.Ports {
		p := &sp.Ports[i]
		if p.Protocol == "" {
			p.Protocol = corev1.ProtocolTCP
		}
		if p.TargetPort == intstr.FromInt32(0) || p.TargetPort == intstr.FromString("") {
			p.TargetPort = intstr.FromInt32(p.Port)
		}
	}
	external := sp.Type == corev1.ServiceTypeNodePort || sp.Type == corev1.ServiceTypeLoadBalancer || len(sp.ExternalIPs) > 0
	if external && sp.ExternalTrafficPolicy == "" {
		sp.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	}
	if sp.InternalTrafficPolicy == nil && sp.Type != corev1.ServiceTypeExternalName {
		sp.InternalTrafficPolicy = ptr.To(corev1.ServiceInternalTrafficPolicyCluster)
	}
	if sp.Type == corev1.ServiceTypeLoadBalancer && sp.AllocateLoadBalancerNodePorts == nil {
		sp.AllocateLoadBalancerNodePorts = ptr.To(true)
	}
}

// allocateService makes a new Service's allocations (the lock is held);
// the IPs it takes are in the result, for commitService.
func (s *Store) allocateService(svc *corev1.Service) ([]string, error) {
	sp := &svc.Spec
	if sp.Type == corev1.ServiceTypeExternalName {
		return nil, nil
	}
	headlessNoSelector := sp.ClusterIP == corev1.ClusterIPNone && len(sp.Selector) == 0
	if sp.IPFamilyPolicy == nil {
		pol := corev1.IPFamilyPolicySingleStack
		if headlessNoSelector {
			pol = corev1.IPFamilyPolicyRequireDualStack
		}
		sp.IPFamilyPolicy = &pol
	}
	if len(sp.IPFamilies) == 0 {
		sp.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol}
		if headlessNoSelector && *sp.IPFamilyPolicy != corev1.IPFamilyPolicySingleStack {
			sp.IPFamilies = append(sp.IPFamilies, corev1.IPv6Protocol)
		}
	}
	if err := validateServicePorts(svc); err != nil {
		return nil, err
	}
	var taken []string
	switch {
	case sp.ClusterIP == corev1.ClusterIPNone:
		sp.ClusterIPs = []string{corev1.ClusterIPNone}
	case sp.ClusterIP != "":
		if len(sp.ClusterIPs) == 0 {
			sp.ClusterIPs = []string{sp.ClusterIP}
		}
		if err := s.claimIP(svc, sp.ClusterIP); err != nil {
			return nil, err
		}
		taken = []string{sp.ClusterIP}
		sp.ClusterIPs = []string{sp.ClusterIP}
	default:
		ip, err := s.freeIP()
		if err != nil {
			return nil, err
		}
		sp.ClusterIP, sp.ClusterIPs, taken = ip, []string{ip}, []string{ip}
	}
	return taken, s.allocateNodePorts(svc)
}

// validateServicePorts is the part of ValidateService the world checks:
// the ports of a Service with several are named.
func validateServicePorts(svc *corev1.Service) error {
	var errs field.ErrorList
	if len(svc.Spec.Ports) > 1 {
		for i, p := range svc.Spec.Ports {
			if p.Name == "" {
				errs = append(errs, field.Required(field.NewPath("spec", "ports").Index(i).Child("name"), ""))
			}
		}
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), svc.Name, errs)
	}
	return nil
}

// serviceRange is the range cluster IPs come from: the world's default
// ServiceCIDR's.
func (s *Store) serviceRange() netip.Prefix {
	if sc, ok := s.objectAt(Resource{Group: networkingv1.GroupName, Version: "v1", Resource: "servicecidrs"}, Key{"", "kubernetes"}).(*networkingv1.ServiceCIDR); ok {
		for _, c := range sc.Spec.CIDRs {
			if p, err := netip.ParsePrefix(c); err == nil && p.Addr().Is4() {
				return p.Masked()
			}
		}
	}
	return defaultServiceRange
}

// ipTaken reports whether a Service of the world has ip (the lock is
// held).
func (s *Store) ipTaken(ip string) bool {
	if h, ok := s.res[ipAddresses]; ok && s.current(h, Key{"", ip}) != nil {
		return true
	}
	for _, o := range s.currentOf(Resource{Version: "v1", Resource: "services"}) {
		if svc, ok := o.(*corev1.Service); ok && svc.Spec.ClusterIP == ip {
			return true
		}
	}
	return false
}

// freeIP picks a free IP of the service range at random, as the
// allocator does (neither the network's address nor its broadcast).
func (s *Store) freeIP() (string, error) {
	p := s.serviceRange()
	size := new(big.Int).Lsh(big.NewInt(1), uint(32-p.Bits())).Int64()
	base := new(big.Int).SetBytes(p.Addr().AsSlice()).Int64()
	if size > 2 {
		for range 64 {
			n := base + 1 + rand.Int64N(size-2)
			ip := net.IPv4(byte(n>>24), byte(n>>16), byte(n>>8), byte(n)).String()
			if !s.ipTaken(ip) {
				return ip, nil
			}
		}
	}
	return "", apierrors.NewInternalError(fmt.Errorf("failed to allocate a serviceIP: range is full"))
}

// claimIP checks that a Service may have the IP it asks for.
func (s *Store) claimIP(svc *corev1.Service, ip string) error {
	a, err := netip.ParseAddr(ip)
	path := field.NewPath("spec", "clusterIPs")
	switch {
	case err != nil:
		return apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), svc.Name, field.ErrorList{field.Invalid(path, badValue(svc.Spec.ClusterIPs), "must be a valid IP address")})
	case !s.serviceRange().Contains(a):
		return apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), svc.Name, field.ErrorList{field.Invalid(path, badValue(svc.Spec.ClusterIPs),
			fmt.Sprintf("failed to allocate IP %v: the provided network does not match the current range", ip))})
	case s.ipTaken(ip):
		return apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), svc.Name, field.ErrorList{field.Invalid(path, badValue(svc.Spec.ClusterIPs),
			fmt.Sprintf("failed to allocate IP %v: provided IP is already allocated", ip))})
	}
	return nil
}

// allocateNodePorts gives the ports of a NodePort Service (or a
// LoadBalancer's that allocates them) a node port each, and a
// LoadBalancer of local traffic its health check port.
func (s *Store) allocateNodePorts(svc *corev1.Service) error {
	sp := &svc.Spec
	if sp.Type != corev1.ServiceTypeNodePort && !(sp.Type == corev1.ServiceTypeLoadBalancer && ptr.Deref(sp.AllocateLoadBalancerNodePorts, true)) {
		return nil
	}
	used := s.usedNodePorts()
	for i := range sp.Ports {
		p := &sp.Ports[i]
		if p.NodePort != 0 {
			if used[p.NodePort] {
				return apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Service").GroupKind(), svc.Name, field.ErrorList{field.Invalid(
					field.NewPath("spec", "ports").Index(i).Child("nodePort"), p.NodePort, fmt.Sprintf("provided port is already allocated"))})
			}
			used[p.NodePort] = true
			continue
		}
		for range 64 {
			n := int32(nodePortBase + rand.IntN(nodePortSize))
			if !used[n] {
				p.NodePort, used[n] = n, true
				break
			}
		}
	}
	if sp.Type == corev1.ServiceTypeLoadBalancer && sp.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal && sp.HealthCheckNodePort == 0 {
		for range 64 {
			n := int32(nodePortBase + rand.IntN(nodePortSize))
			if !used[n] {
				sp.HealthCheckNodePort = n
				break
			}
		}
	}
	return nil
}

// usedNodePorts are the node ports the world's Services have.
func (s *Store) usedNodePorts() map[int32]bool {
	used := map[int32]bool{}
	for _, o := range s.currentOf(Resource{Version: "v1", Resource: "services"}) {
		if svc, ok := o.(*corev1.Service); ok {
			for _, p := range svc.Spec.Ports {
				if p.NodePort != 0 {
					used[p.NodePort] = true
				}
			}
			if svc.Spec.HealthCheckNodePort != 0 {
				used[svc.Spec.HealthCheckNodePort] = true
			}
		}
	}
	return used
}

// recordIPs stores the IPAddress objects of a created Service's IPs (the
// lock is held), as the allocator does.
func (s *Store) recordIPs(svc *corev1.Service, ips []string) {
	h, ok := s.hist(ipAddresses)
	if !ok {
		return
	}
	for _, ip := range ips {
		a := &networkingv1.IPAddress{ObjectMeta: metav1.ObjectMeta{Name: ip, UID: typesUID(s.newUID()), CreationTimestamp: s.timeNow(),
			Labels: map[string]string{networkingv1.LabelIPAddressFamily: string(corev1.IPv4Protocol), networkingv1.LabelManagedBy: "ipallocator.k8s.io"}},
			Spec: networkingv1.IPAddressSpec{ParentRef: &networkingv1.ParentReference{Resource: "services", Namespace: svc.Namespace, Name: svc.Name}}}
		a.SetGroupVersionKind(networkingv1.SchemeGroupVersion.WithKind("IPAddress"))
		_, _ = s.store(h, Key{"", ip}, a, Added)
	}
}

// releaseIPs deletes the IPAddress objects of a deleted Service's IPs
// (the lock is held).
func (s *Store) releaseIPs(svc *corev1.Service) {
	h, ok := s.res[ipAddresses]
	if !ok {
		return
	}
	for _, ip := range svc.Spec.ClusterIPs {
		e := s.current(h, Key{"", ip})
		if e == nil {
			continue
		}
		a, err := s.decodeEntry(e)
		if err != nil {
			continue
		}
		if ia, ok := a.(*networkingv1.IPAddress); ok && ia.Spec.ParentRef != nil && ia.Spec.ParentRef.Name == svc.Name && ia.Spec.ParentRef.Namespace == svc.Namespace {
			_, _ = s.store(h, Key{"", ip}, a, Deleted)
		}
	}
}

// keepAllocated is patchAllocatedValues: an update of a Service that
// leaves out what was allocated keeps it.
func keepAllocated(svc, old *corev1.Service) {
	sp, op := &svc.Spec, &old.Spec
	if sp.ClusterIP == "" && len(sp.ClusterIPs) == 0 {
		sp.ClusterIP, sp.ClusterIPs = op.ClusterIP, op.ClusterIPs
	}
	if sp.IPFamilyPolicy == nil && sp.Type == op.Type {
		sp.IPFamilyPolicy = op.IPFamilyPolicy
	}
	if len(sp.IPFamilies) == 0 && sp.Type == op.Type {
		sp.IPFamilies = op.IPFamilies
	}
	for i := range sp.Ports {
		if sp.Ports[i].NodePort != 0 {
			continue
		}
		for _, o := range op.Ports {
			if o.Port == sp.Ports[i].Port && o.Protocol == sp.Ports[i].Protocol {
				sp.Ports[i].NodePort = o.NodePort
			}
		}
	}
	if sp.HealthCheckNodePort == 0 {
		sp.HealthCheckNodePort = op.HealthCheckNodePort
	}
}
